package main

import (
	"bytes"
	"io"
	"sync"
)

// watchedOutput passes everything through to w while counting lines and the lines that contain
// one of the secrets, so the demo can say at the end that no password was printed (and the test
// can check that it is true). It is safe for concurrent use.
type watchedOutput struct {
	w       io.Writer
	secrets [][]byte

	mu      sync.Mutex
	partial []byte // the last line, not yet ended
	lines   int
	leaks   int
}

func newWatchedOutput(w io.Writer, secrets []string) *watchedOutput {
	o := &watchedOutput{w: w}
	for _, s := range secrets {
		o.secrets = append(o.secrets, []byte(s))
	}
	return o
}

func (o *watchedOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.partial = append(o.partial, p...)
	for {
		i := bytes.IndexByte(o.partial, '\n')
		if i < 0 {
			break
		}
		o.check(o.partial[:i])
		o.partial = o.partial[i+1:]
	}
	return o.w.Write(p)
}

func (o *watchedOutput) check(line []byte) {
	o.lines++
	for _, s := range o.secrets {
		if bytes.Contains(line, s) {
			o.leaks++
			return
		}
	}
}

// counts returns the lines written so far and how many held a secret.
func (o *watchedOutput) counts() (lines, leaks int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lines, o.leaks
}

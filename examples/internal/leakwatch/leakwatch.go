package leakwatch

import (
	"bytes"
	"io"
	"sync"
)

// Writer passes everything through to the writer it wraps while counting lines and the lines
// that contain a secret. It is safe for concurrent use. A last line not ended by a newline is not
// counted.
type Writer struct {
	w       io.Writer
	secrets [][]byte

	mu      sync.Mutex
	partial []byte // the last line, not yet ended
	lines   int
	leaks   int
}

// New returns a Writer to w that watches for secrets; empty secrets are ignored.
func New(w io.Writer, secrets []string) *Writer {
	o := &Writer{w: w}
	for _, s := range secrets {
		if s != "" {
			o.secrets = append(o.secrets, []byte(s))
		}
	}
	return o
}

// Write counts the lines p ends and writes p to the wrapped writer.
func (o *Writer) Write(p []byte) (int, error) {
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

func (o *Writer) check(line []byte) {
	o.lines++
	for _, s := range o.secrets {
		if bytes.Contains(line, s) {
			o.leaks++
			return
		}
	}
}

// Counts returns the lines written so far and how many of them held a secret.
func (o *Writer) Counts() (lines, leaks int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lines, o.leaks
}

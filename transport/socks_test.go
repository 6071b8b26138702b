package transport

import (
	"errors"
	"io"
	"net"
	"net/url"
	"testing"

	"github.com/proxybreaker/proxybreaker/pool"
)

// socksChunkConn is a net.Conn whose reads return chunks, one per Read, then EOF.
type socksChunkConn struct {
	net.Conn // nil: only Read is called
	chunks   [][]byte
}

func (c *socksChunkConn) Read(b []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(b, c.chunks[0])
	if c.chunks[0] = c.chunks[0][n:]; len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

// socksWatchRead reads everything from chunks through a socksWatch, in reads of at most 2 bytes
// while the handshake lasts (as x/net/proxy reads it) and then whole, and returns the watch.
func socksWatchRead(userPass bool, chunks ...[]byte) *socksWatch {
	w := &socksWatch{Conn: &socksChunkConn{chunks: chunks}, userPass: userPass}
	buf := make([]byte, 64)
	for i := 0; ; i++ {
		size := len(buf)
		if i < 2 {
			size = 2
		}
		if _, err := w.Read(buf[:size]); err != nil {
			return w
		}
	}
}

func TestSOCKSWatch(t *testing.T) {
	tests := []struct {
		name     string
		userPass bool
		chunks   [][]byte
		want     bool
	}{
		{"no auth chosen", false, [][]byte{{5, 0}, {5, 0, 0, 1, 127, 0, 0, 1, 0, 80}}, false},
		{"no auth chosen, refused target", false, [][]byte{{5, 0}, {5, 2, 0, 1, 0, 0, 0, 0, 0, 0}}, false},
		{"no auth chosen though credentials offered", true, [][]byte{{5, 0}, {5, 1, 0, 1}}, false},
		{"credentials accepted", true, [][]byte{{5, 2}, {1, 0}, {5, 0, 0, 1, 127, 0, 0, 1, 0, 80}}, false},
		{"credentials accepted, refused target", true, [][]byte{{5, 2}, {1, 0}, {5, 5, 0, 1}}, false},
		{"credentials rejected", true, [][]byte{{5, 2}, {1, 1}}, true},
		{"credentials rejected, other status", true, [][]byte{{5, 2}, {1, 0x7f}}, true},
		{"credentials rejected, one byte at a time", true, [][]byte{{5}, {2}, {1}, {1}}, true},
		{"credentials rejected, all at once", true, [][]byte{{5, 2, 1, 1}}, true},
		{"no acceptable methods, credentials offered", true, [][]byte{{5, 0xff}}, true},
		{"no acceptable methods, none offered", false, [][]byte{{5, 0xff}}, true},
		{"username/password chosen though not offered", false, [][]byte{{5, 2}, {5, 1, 0, 1}}, false},
		{"bad sub-negotiation version", true, [][]byte{{5, 2}, {5, 1}}, false},
		{"proxy hung up after the method", true, [][]byte{{5, 2}}, false},
		{"proxy hung up at once", true, nil, false},
	}
	for i, tt := range tests {
		if got := socksWatchRead(tt.userPass, tt.chunks...).authRejected(); got != tt.want {
			t.Errorf("step %d (%s): authRejected() after % x = %t, want %t", i, tt.name, tt.chunks, got, tt.want)
		}
	}
}

// FuzzSOCKSWatch checks that socksWatch never panics on what a proxy may send, passes every byte
// on unchanged, and judges a stream the same however it is split into reads.
func FuzzSOCKSWatch(f *testing.F) {
	f.Add([]byte{5, 2, 1, 1}, uint8(1), true)
	f.Add([]byte{5, 0, 5, 0, 0, 1, 127, 0, 0, 1, 0, 80}, uint8(2), false)
	f.Add([]byte{5, 0xff}, uint8(0), true)
	f.Fuzz(func(t *testing.T, data []byte, split uint8, userPass bool) {
		whole := socksWatchRead(userPass, append([]byte(nil), data...))
		var chunks [][]byte
		step := int(split%5) + 1
		for i := 0; i < len(data); i += step {
			chunks = append(chunks, append([]byte(nil), data[i:min(i+step, len(data))]...))
		}
		split1 := socksWatchRead(userPass, chunks...)
		if whole.authRejected() != split1.authRejected() {
			t.Errorf("authRejected(% x) = %t whole, %t in reads of %d", data, whole.authRejected(), split1.authRejected(), step)
		}

		w := &socksWatch{Conn: &socksChunkConn{chunks: [][]byte{append([]byte(nil), data...)}}, userPass: userPass}
		got, err := io.ReadAll(w)
		if err != nil || string(got) != string(data) {
			t.Errorf("ReadAll through socksWatch = % x, %v, want % x", got, err, data)
		}
	})
}

func TestClassifySOCKSAuthError(t *testing.T) {
	cause := &net.OpError{Op: "socks connect", Net: "tcp", Err: errors.New("username/password authentication failed")}
	sae := &socksAuthError{exit: "socks5://u:xxxxx@127.0.0.1:1080", err: cause}
	want := pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}
	for i, err := range []error{sae, &url.Error{Op: "Get", URL: "http://o.example/", Err: sae}} {
		if got := DefaultClassifier.Classify(&Attempt{Err: err}); got != want {
			t.Errorf("step %d: classifyError(%v) = %+v, want %+v", i, err, got, want)
		}
	}
	// The same x/net/proxy error unmarked is not an authentication failure: the marking comes from
	// the wire, never from the message text.
	if got := DefaultClassifier.Classify(&Attempt{Err: cause}); got.Class == pool.ClassProxyAuth {
		t.Errorf("classifyError(unmarked %v) = %+v, want anything but %s", cause, got, pool.ClassProxyAuth)
	}
	if !errors.Is(sae, cause) {
		t.Errorf("errors.Is(socksAuthError, cause) = false, want true")
	}
}

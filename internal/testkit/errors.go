package testkit

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
)

// Errors for Reply.Err, shaped like the ones net/http returns: a read that timed out, and a
// connection the peer reset.
var (
	ErrTimeout error = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	ErrReset   error = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
)

// RefusedErr returns a real ECONNREFUSED dial error, made by dialing a loopback port that was just
// closed. It fails the test when loopback does not behave so.
func RefusedErr(t testing.TB) error {
	t.Helper()
	addr, err := proxytest.ClosedAddr()
	if err != nil {
		t.Fatalf("testkit.RefusedErr: %v", err)
	}
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("testkit.RefusedErr: the closed loopback port %s accepted a connection", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("testkit.RefusedErr: dialing the closed port %s gave %v, not ECONNREFUSED", addr, err)
	}
	return err
}

// RetryAfter returns a header with Retry-After set to secs seconds.
func RetryAfter(secs int) http.Header {
	return http.Header{"Retry-After": {strconv.Itoa(secs)}}
}

// TrackedBody is a request body that counts how often it was closed, for checking that a
// RoundTripper closes the request body on every path. It is safe for concurrent Close calls.
type TrackedBody struct {
	io.Reader
	closes atomic.Int32
}

// NewTrackedBody returns a TrackedBody reading s.
func NewTrackedBody(s string) *TrackedBody {
	return &TrackedBody{Reader: strings.NewReader(s)}
}

// Close counts the call.
func (b *TrackedBody) Close() error { b.closes.Add(1); return nil }

// Closes returns how many times Close was called.
func (b *TrackedBody) Closes() int { return int(b.closes.Load()) }

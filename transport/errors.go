package transport

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/proxybreaker/proxybreaker/pool"
)

// Sentinel errors of the package.
var (
	// ErrClosed is returned by RoundTrip after Close.
	ErrClosed = errors.New("transport: closed")
	// ErrSlowBody matches every *SlowBodyError (errors.Is).
	ErrSlowBody = errors.New("transport: response body too slow")
	// ErrBadRetryAfter is returned by ParseRetryAfter for a value that is neither a non-negative
	// number of seconds nor an HTTP-date.
	ErrBadRetryAfter = errors.New("transport: bad Retry-After")
)

// ProxyConnectError is a CONNECT the proxy answered with something other than 200: 407 when it
// rejected the credentials, 403 when it refuses the target. The per-exit base transport returns it
// from OnProxyConnectResponse, with the proxy's status line and headers, so classification never
// matches on error strings and proxy error readers see the proxy's own markers (X-Squid-Error…).
type ProxyConnectError struct {
	Exit       string // the exit's label
	StatusCode int
	Status     string      // the status line after the version: "403 Forbidden"; may be empty
	Header     http.Header // the proxy's response headers; may be nil
}

// Error names the exit, by label, and the status the proxy answered the CONNECT with.
func (e *ProxyConnectError) Error() string {
	return fmt.Sprintf("transport: exit %s: proxy refused CONNECT: %d %s", e.Exit, e.StatusCode, http.StatusText(e.StatusCode))
}

// AttemptError is one attempt through an exit that came to nothing: the error RoundTrip returns
// when an attempt failed without a response (Err says why), and the error ErrorFromResponse makes
// of a response the transport counted against its exit (StatusCode says which; Err is nil). It
// names the exit that carried the attempt, by label, and how the outcome was classified.
type AttemptError struct {
	Exit    string // the exit's label
	Origin  string
	Verdict pool.Verdict
	Err     error // the cause; nil for a response
	// StatusCode is the status of the response ErrorFromResponse judged; 0 when none arrived.
	StatusCode int
}

// Error names the exit, by label, the origin and the verdict's class, then the response's
// status (with its detector and Retry-After) or the cause.
func (e *AttemptError) Error() string {
	if e.Err == nil && e.StatusCode != 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "transport: via %s to %s: %s", e.Exit, e.Origin, e.Verdict.Class)
		if e.Verdict.Detector != "" {
			fmt.Fprintf(&b, " (%s)", e.Verdict.Detector)
		}
		fmt.Fprintf(&b, ": %d", e.StatusCode)
		if text := http.StatusText(e.StatusCode); text != "" {
			b.WriteString(" " + text)
		}
		if e.Verdict.RetryAfter > 0 {
			fmt.Fprintf(&b, ", retry after %v", e.Verdict.RetryAfter)
		}
		return b.String()
	}
	return fmt.Sprintf("transport: via %s to %s: %s: %v", e.Exit, e.Origin, e.Verdict.Class, e.Err)
}

// Unwrap returns the cause.
func (e *AttemptError) Unwrap() error { return e.Err }

// Timeout reports whether the attempt timed out (a dial, TLS, CONNECT or header timeout), so that
// *url.Error.Timeout() answers for it.
func (e *AttemptError) Timeout() bool {
	var ne interface{ Timeout() bool }
	return errors.As(e.Err, &ne) && ne.Timeout()
}

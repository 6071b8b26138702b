package transport

import (
	"net/http"

	"github.com/proxybreaker/proxybreaker/pool"
)

// ErrorFromResponse returns an *AttemptError for a response the transport counted against the exit
// that carried it — a 407 from the proxy, a 429, a challenge or block page (one served with 200
// too), a plain 403 the pool judged a ban, a 502/503/504, the proxy's own error page — and nil for a response the exit did its job
// with (2xx, 3xx, a 404 or another 4xx the origin sent, the origin's own 500) or one that did not
// come through a Transport.
//
// RoundTrip returns those failures as responses with a nil error, as net/http's contract requires,
// so a caller that checks only err takes a 407 or a 429 for a success. ErrorFromResponse lets one
// error path handle them with the failures that came without a response:
//
//	resp, err := client.Do(req)
//	if err == nil {
//		defer resp.Body.Close()
//		err = transport.ErrorFromResponse(resp) // a 407, a 429, a challenge page: the exit's failures
//	}
//	var ae *transport.AttemptError
//	if errors.As(err, &ae) && ae.Verdict.Outcome != pool.Neutral {
//		// counted against ae.Exit, with a response (ae.StatusCode) or without (ae.Err)
//	}
//
// The error carries the exit's label (never its credentials), the origin, the verdict and the
// status; its Err is nil. ErrorFromResponse reads the verdict given when the headers arrived
// (VerdictFromResponse) and leaves the body alone: the caller still reads or closes it. A success
// whose body then dies, stalls or trickles fails its Read instead (a *SlowBodyError for the body
// pace rule). It is safe to call from any goroutine, any number of times.
func ErrorFromResponse(resp *http.Response) error {
	a := attemptOf(resp)
	if a == nil {
		return nil
	}
	switch a.verdict.Outcome {
	case pool.Transient, pool.Permanent:
		return &AttemptError{Exit: a.info.Exit.Label(), Origin: a.info.Origin, Verdict: a.verdict, StatusCode: a.status}
	}
	return nil
}

package sim

import (
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// onTheWire is what a real exit would hand a Transport for the result r at now: the response, or
// the error net/http returns.
func onTheWire(t *testing.T, r Result, now time.Time) *transport.Attempt {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+OriginKey(0)+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &transport.Attempt{Request: req, Exit: pool.MustParseExit("http://127.0.0.1:20000"), Origin: OriginKey(0), Now: now}
	switch r.Err {
	case ErrTimeout: // the response headers did not come in time
		a.Err = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
		return a
	case ErrRefused: // nothing listens at the proxy's address
		a.Err = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		return a
	}
	resp := &http.Response{
		StatusCode: r.Status, Status: strconv.Itoa(r.Status) + " " + http.StatusText(r.Status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Request: req,
	}
	body := "ok"
	switch r.Status {
	case 429:
		resp.Header.Set("Retry-After", strconv.Itoa(int(r.RetryAfter/time.Second)))
		body = "slow down"
	case 403: // a ban: Cloudflare's challenge page
		resp.Header.Set("Server", "cloudflare")
		resp.Header.Set("Cf-Mitigated", "challenge")
		resp.Header.Set("Content-Type", "text/html; charset=utf-8")
		body = "<html><title>Just a moment...</title></html>"
	case 407:
		body = "proxy auth required"
	}
	resp.Body = io.NopCloser(strings.NewReader(body))
	resp.ContentLength = int64(len(body))
	a.Response = resp
	return a
}

// answers collects every distinct answer the default scenario's ground truth gives (latency aside):
// each pair over its cap within a minute, and every exit to every origin across the run, bans
// included.
func answers() []Result {
	sc := DefaultScenario()
	g := NewTruth(sc)
	seen := map[Result]bool{}
	var rs []Result
	add := func(r Result) {
		r.Latency = 0
		if !seen[r] {
			seen[r] = true
			rs = append(rs, r)
		}
	}
	for e := range sc.Exits {
		for o := range sc.Origins {
			for i := range sc.RatePerMinute + 2 {
				add(g.Send(e, o, Epoch.Add(time.Duration(i)*time.Second)))
			}
			for at := Epoch.Add(time.Hour); at.Before(Epoch.Add(sc.Duration)); at = at.Add(97 * time.Second) {
				add(g.Peek(e, o, at))
			}
		}
	}
	return rs
}

// TestVerdictMatchesClassifier checks that Verdict gives every answer of the ground truth the
// verdict transport.DefaultClassifier gives the response or error a real exit would produce: the
// simulation drives the pool as the Transport would.
func TestVerdictMatchesClassifier(t *testing.T) {
	now := Epoch.Add(90 * time.Second)
	kinds := map[string]bool{}
	for i, r := range answers() {
		want := transport.DefaultClassifier.Classify(onTheWire(t, r, now))
		if got := Verdict(r); got != want {
			t.Errorf("step %d: Verdict(%+v) = %+v, want %+v (DefaultClassifier)", i, r, got, want)
		}
		kinds[strconv.Itoa(r.Status)+"/"+strconv.Itoa(int(r.Err))] = true
	}
	for _, k := range []string{"200/0", "403/0", "407/0", "429/0", "0/1", "0/2"} {
		if !kinds[k] {
			t.Errorf("the ground truth never answered %s (status/ErrKind): the check above did not cover it", k)
		}
	}
}

func TestVerdictPanicsOnUnknownStatus(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("Verdict(Result{Status: 418}) did not panic, want a panic: an answer nobody judged")
		}
	}()
	Verdict(Result{Status: 418})
}

package sim

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// answers collects every distinct result the worlds' ground truths give (latency aside): each
// pair over its cap within a minute, and every exit to every origin across the run, for both
// paths, bans, denials, slow bodies and outages included.
func answers() []Result {
	seen := map[Result]bool{}
	var rs []Result
	add := func(r Result) {
		r.Latency = 0
		if !seen[r] {
			seen[r] = true
			rs = append(rs, r)
		}
	}
	for _, sc := range []Scenario{Round1World(), Round2World(1), Round3World(1)} {
		g := NewTruth(sc)
		for e := range sc.Exits {
			for o := range sc.Origins {
				for _, forbidden := range []bool{false, true} {
					q := Request{Origin: o, Forbidden: forbidden && sc.Origins[o].ForbiddenShare > 0}
					for i := range 62 {
						add(g.Send(e, q, at(i, time.Second)))
					}
					for t := Epoch.Add(time.Hour); t.Before(Epoch.Add(sc.Duration)); t = t.Add(97 * time.Second) {
						add(g.Peek(e, q, t))
					}
				}
			}
		}
	}
	return rs
}

// TestWorldsGiveEveryAnswer checks that the worlds give every answer Verdict knows, in each of
// the forms Judgements lists, so that the checks below cover what the runs report.
func TestWorldsGiveEveryAnswer(t *testing.T) {
	type form struct {
		a      Answer
		https  bool
		withRA bool
	}
	got := map[form]bool{}
	for _, r := range answers() {
		f := form{a: r.Answer, withRA: r.RetryAfter > 0}
		if r.Answer == ProxyAuth || r.Answer == ProxyDenied {
			f.https = r.HTTPS
		}
		got[f] = true
	}
	for _, j := range Judgements() {
		f := form{a: j.Result.Answer, https: j.Result.HTTPS, withRA: j.Result.RetryAfter > 0}
		if !got[f] {
			t.Errorf("no world answers %v (https %v, Retry-After %v): its judgement is never used", f.a, f.https, f.withRA)
		}
	}
	for a := range numAnswers {
		found := false
		for _, j := range Judgements() {
			found = found || j.Result.Answer == a
		}
		if !found {
			t.Errorf("Judgements lists no %v", a)
		}
	}
}

// recorder is an Observer that keeps the last verdict.
type recorder struct {
	transport.NopObserver
	mu sync.Mutex
	v  pool.Verdict
	n  int
}

func (r *recorder) AttemptFinished(_ context.Context, a transport.AttemptResult) {
	r.mu.Lock()
	r.v, r.n = a.Verdict, r.n+1
	r.mu.Unlock()
}

// TestVerdictMatchesTransport checks that Verdict judges every form of every answer as a real
// transport.Transport does when its exit's base transport hands it what onTheWire builds: the
// verdict its observer hears, once the caller has read the body. So driving the pool directly
// judges every answer as the Transport over a real network would, whatever the classifier's rules.
func TestVerdictMatchesTransport(t *testing.T) {
	now := Epoch.Add(90 * time.Second)
	for i, j := range Judgements() {
		r := j.Result
		p, err := pool.New(pool.WithExits(wireExit), pool.WithClock(clock.NewFake(now)))
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) { return onTheWire(r, req) })
		tr, err := transport.New(p, transport.WithBase(base), transport.WithObserver(rec))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTrip(wireRequest(r))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		tr.Close()
		p.Close()
		rec.mu.Lock()
		got, n := rec.v, rec.n
		rec.mu.Unlock()
		if n != 1 {
			t.Errorf("step %d (%v): the Transport reported %d verdicts, want 1", i, r, n)
			continue
		}
		if want := Verdict(r, now); got != want {
			t.Errorf("step %d: Verdict(%+v) = %+v, want %+v (a transport.Transport's)", i, r, want, got)
		}
		if j.Verdict != Verdict(r, Epoch) {
			t.Errorf("step %d: Judgements gives %+v, Verdict %+v", i, j.Verdict, Verdict(r, Epoch))
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestVerdictWorld checks what the ground truth means, whatever the classifier's rules: a page is
// a success; the failures of an exit (dead, failing auth, flaky, slow) are not; a proxy denial
// blames no more than the pair, since the proxy serves other origins; and a plain 403 reads the
// same whether it is a ban or the site's answer, since only other exits' answers tell them apart.
func TestVerdictWorld(t *testing.T) {
	v := func(a Answer, https bool) pool.Verdict { return Verdict(Result{Answer: a, HTTPS: https}, Epoch) }
	if got := v(OK, false); got.Outcome != pool.Success {
		t.Errorf("Verdict(OK) = %+v, want a success", got)
	}
	for _, a := range []Answer{Refused, ProxyAuth, Timeout, SlowBody, Challenge, RateLimited} {
		if got := v(a, false); got.Outcome == pool.Success || got.Outcome == pool.Neutral {
			t.Errorf("Verdict(%v) = %+v, want a failure", a, got)
		}
	}
	for _, https := range []bool{false, true} {
		if got := v(ProxyDenied, https); got.Outcome == pool.Success || got.Scope != pool.ScopePair {
			t.Errorf("Verdict(ProxyDenied, https %v) = %+v, want a failure of the pair", https, got)
		}
		if b, s := v(Banned403, https), v(Site403, https); b != s {
			t.Errorf("Verdict(Banned403, https %v) = %+v, Verdict(Site403) = %+v: want the same", https, b, s)
		}
	}
}

func TestVerdictPanicsOnUnknownAnswer(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("Verdict(Result{Answer: numAnswers}) did not panic, want a panic: an answer nobody judged")
		}
	}()
	Verdict(Result{Answer: numAnswers}, Epoch)
}

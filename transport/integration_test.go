package transport_test

// Integration tests through real tinyproxy processes (internal/servertest) on 127.0.0.1. Network
// I/O is real; breaker time is a fake clock, so no test sleeps waiting for a state change. Exits
// whose source address matters bind tinyproxy's outgoing connections to 127.0.0.2 and up, so an
// origin can name the proxy that carried each request, through CONNECT tunnels and HTTP/2 too.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/internal/servertest"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// TestIntegHealthyTrafficThroughTinyproxies: plain HTTP and CONNECT (HTTP/2) traffic through
// three tinyproxies all succeeds, each response names the exit that carried it (which, for plain
// HTTP, the Via header tinyproxy added confirms), every exit takes a share, and every breaker is
// CLOSED afterwards.
func TestIntegHealthyTrafficThroughTinyproxies(t *testing.T) {
	t.Parallel()
	plain := integOrigin(t, false, nil)
	secure := integOrigin(t, true, nil)
	names := []string{"tp-a", "tp-b", "tp-c"}
	var exits []*pool.Exit
	for _, name := range names {
		u := servertest.Tinyproxy(t, servertest.TinyproxyConfig{Name: name})
		exits = append(exits, integExit(t, u, name))
	}
	fc := newIntegClock()
	tr, c := integNew(t, []*httptest.Server{secure},
		pool.WithExits(exits...), pool.WithClock(fc), pool.WithSelection(pool.Random))

	const perOrigin = 24
	used := map[string]int{}
	for i := range 2 * perOrigin {
		if i%2 == 0 {
			r := integMustGet(t, c, plain.URL)
			// tinyproxy's Via: "1.1 NAME (tinyproxy/VERSION)".
			if want := " via=1.1 " + r.exit + " "; !strings.Contains(r.body, want) {
				t.Errorf("request %d: plain GET via exit %s: body %q, want it to contain %q (tinyproxy's Via)", i, r.exit, r.body, want)
			}
			used[r.exit]++
			continue
		}
		r := integMustGet(t, c, secure.URL)
		if r.proto != 2 {
			t.Errorf("request %d: HTTPS GET via %s: ProtoMajor = %d, want 2", i, r.exit, r.proto)
		}
		if strings.Contains(r.body, "via=1.1") {
			t.Errorf("request %d: HTTPS GET body %q: a CONNECT tunnel must not be rewritten by the proxy", i, r.body)
		}
		used[r.exit]++
	}
	for _, name := range names {
		if used[name] == 0 {
			t.Errorf("exit %s carried no request of %d: used = %v", name, 2*perOrigin, used)
		}
	}

	s := tr.Pool().Snapshot()
	if len(s.Exits) != len(names) {
		t.Fatalf("Snapshot().Exits = %d, want %d", len(s.Exits), len(names))
	}
	for _, e := range s.Exits {
		if e.Breaker.State != breaker.Closed || e.InFlight != 0 || e.Breaker.Trips != 0 {
			t.Errorf("exit %s: state %v, in flight %d, trips %d; want closed, 0, 0", e.Exit, e.Breaker.State, e.InFlight, e.Breaker.Trips)
		}
	}
	for _, p := range s.Pairs {
		if p.Breaker.State != breaker.Closed || p.Breaker.Trips != 0 {
			t.Errorf("pair (%s, %s): state %v, trips %d; want closed, 0", p.Exit, p.Origin, p.Breaker.State, p.Breaker.Trips)
		}
	}
	if len(s.Origins) != 2 {
		t.Errorf("Snapshot().Origins = %+v, want the 2 origins", s.Origins)
	}
	for _, o := range s.Origins {
		if o.Breaker.State != breaker.Closed {
			t.Errorf("origin %s: state %v, want closed", o.Origin, o.Breaker.State)
		}
	}
}

// integBoundTinyproxies starts one tinyproxy per bind address and returns their exits, labelled
// "via-ADDR", and the map from source address to label.
func integBoundTinyproxies(t *testing.T, binds ...string) ([]*pool.Exit, []*url.URL, map[string]string) {
	t.Helper()
	var exits []*pool.Exit
	var urls []*url.URL
	byIP := map[string]string{}
	for _, ip := range binds {
		u := servertest.Tinyproxy(t, servertest.TinyproxyConfig{Bind: ip})
		label := "via-" + ip
		exits = append(exits, integExit(t, u, label))
		urls = append(urls, u)
		byIP[ip] = label
	}
	return exits, urls, byIP
}

// TestIntegHTTP2RoutingTruth: with HTTP/2 to the origin, every request leaves through the exit the
// transport says carried it. Three tinyproxies bind their outgoing connections to 127.0.0.2, .3
// and .4; the origin reports the source address it saw.
func TestIntegHTTP2RoutingTruth(t *testing.T) {
	t.Parallel()
	secure := integOrigin(t, true, nil)
	exits, _, byIP := integBoundTinyproxies(t, "127.0.0.2", "127.0.0.3", "127.0.0.4")
	fc := newIntegClock()
	_, c := integNew(t, []*httptest.Server{secure},
		pool.WithExits(exits...), pool.WithClock(fc), pool.WithSelection(pool.Random))

	const workers, each = 6, 10
	var (
		mu      sync.Mutex
		results []integResult
		wg      sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				r := integGet(c, secure.URL)
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	used := map[string]int{}
	for i, r := range results {
		if r.err != nil || r.status != http.StatusOK {
			t.Errorf("request %d: %d, err %v; want 200", i, r.status, r.err)
			continue
		}
		if r.proto != 2 {
			t.Errorf("request %d: ProtoMajor = %d, want 2", i, r.proto)
		}
		if carried := byIP[r.from]; carried != r.exit {
			t.Errorf("request %d: ExitFromResponse = %s, but the origin saw %s (%s)", i, r.exit, r.from, carried)
		}
		used[r.exit]++
	}
	if len(used) != len(exits) {
		t.Errorf("exits used = %v, want all %d of them", used, len(exits))
	}
	t.Logf("requests per exit: %v", used)
}

// integIntendedKey carries, in a request's context, the proxy the shared transport of the
// negative control is asked to use for it.
type integIntendedKey struct{}

// TestIntegHTTP2SharedTransportMisroutes is the negative control of TestIntegHTTP2RoutingTruth: it
// shows why the transport keeps one *http.Transport per exit. One shared *http.Transport whose
// Proxy func picks a different proxy for each request sends requests through the wrong proxy as
// soon as an HTTP/2 connection to the origin exists, because net/http pools HTTP/2 connections by
// origin alone. The transport, through the same three proxies to the same origin, never does.
func TestIntegHTTP2SharedTransportMisroutes(t *testing.T) {
	t.Parallel()
	secure := integOrigin(t, true, nil)
	binds := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	exits, urls, byIP := integBoundTinyproxies(t, binds...)
	const n = 30

	shared := testkit.TLSTemplate(secure)
	shared.Proxy = func(r *http.Request) (*url.URL, error) {
		return r.Context().Value(integIntendedKey{}).(*url.URL), nil
	}
	t.Cleanup(shared.CloseIdleConnections)
	sharedMismatches, sharedH2 := 0, 0
	for i := range n {
		intended := i % len(urls)
		ctx := context.WithValue(context.Background(), integIntendedKey{}, urls[intended])
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, secure.URL, nil)
		resp, err := shared.RoundTrip(req)
		if err != nil {
			t.Fatalf("shared transport: request %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.ProtoMajor == 2 {
			sharedH2++
		}
		if got := resp.Header.Get(integFromHeader); got != binds[intended] {
			sharedMismatches++
		}
	}
	if sharedH2 != n {
		t.Errorf("shared transport: %d of %d responses over HTTP/2, want all", sharedH2, n)
	}
	if sharedMismatches == 0 {
		t.Errorf("shared transport with a per-request Proxy func: 0 of %d requests misrouted; want some, "+
			"or net/http no longer pools HTTP/2 by origin alone and the per-exit design needs a new reason", n)
	}
	t.Logf("shared transport: %d of %d requests left through a proxy other than the one Proxy returned", sharedMismatches, n)

	fc := newIntegClock()
	_, c := integNew(t, []*httptest.Server{secure},
		pool.WithExits(exits...), pool.WithClock(fc), pool.WithSelection(pool.Random))
	oursMismatches := 0
	for i := range n {
		r := integMustGet(t, c, secure.URL)
		if r.proto != 2 || byIP[r.from] != r.exit {
			oursMismatches++
			t.Errorf("transport: request %d: %s over HTTP/%d, origin saw %s", i, r.exit, r.proto, r.from)
		}
	}
	if oursMismatches != 0 {
		t.Errorf("transport: %d of %d requests misrouted, want 0", oursMismatches, n)
	}
}

// TestIntegProxyAuthParksExit: an exit whose tinyproxy rejects its credentials is parked for every
// origin by the first verdict that shows the rejection, and a healthy exit serves everything after.
// The bad exit is in tier 0 and the healthy one in tier 1, so the bad one is always tried first
// while it is ready.
//
// tinyproxy 1.11.1 answers a request without credentials 407, but wrong credentials 401 (tinyproxy
// issue #532), over plain HTTP and CONNECT alike. A 401 to a CONNECT can only be the proxy's; a
// 401 to a plain HTTP request cannot be told from the origin's, so it is the origin's answer and
// the exit is parked by the first CONNECT instead.
func TestIntegProxyAuthParksExit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		connect     bool // the first request is to the HTTPS origin
		noCreds     bool // the exit sends no credentials at all (407), else wrong ones (401)
		wantParkReq int  // requests through the bad exit before it is parked
	}{
		{name: "connect first, wrong password", connect: true, wantParkReq: 1},
		{name: "connect first, no credentials", connect: true, noCreds: true, wantParkReq: 1},
		{name: "plain first, no credentials", noCreds: true, wantParkReq: 1},
		{name: "plain first, wrong password", wantParkReq: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plain := integOrigin(t, false, nil)
			plain2 := integOrigin(t, false, nil)
			secure := integOrigin(t, true, nil)
			authURL := servertest.Tinyproxy(t, servertest.TinyproxyConfig{User: "alice", Pass: "right-pass"})
			goodURL := servertest.Tinyproxy(t, servertest.TinyproxyConfig{})
			badURL := integWithPass(authURL, "alice", "wrong-pass")
			if tt.noCreds {
				badURL.User = nil
			}
			bad := integExit(t, badURL, "auth-bad").WithTier(0)
			good := integExit(t, goodURL, "good").WithTier(1)
			obs := &integObserver{}
			fc := newIntegClock()
			tr, c := integNew(t, []*httptest.Server{secure},
				pool.WithExits(bad, good), pool.WithClock(fc), transport.WithObserver(obs))

			first, other := plain.URL, secure.URL
			if tt.connect {
				first, other = secure.URL, plain.URL
			}
			r := integGet(c, first)
			switch {
			case tt.connect:
				// The CONNECT failed: an error naming the exit, the status and the class.
				if r.err == nil {
					t.Fatalf("first request (CONNECT) = %d via %s, want an error", r.status, r.exit)
				}
				ae := integAttemptError(t, r.err)
				var pce *transport.ProxyConnectError
				if !errors.As(r.err, &pce) || (pce.StatusCode != 407 && pce.StatusCode != 401) {
					t.Errorf("first request error = %v, want a *ProxyConnectError with 407 or 401", r.err)
				}
				if ae.Exit != "auth-bad" || ae.Verdict.Class != pool.ClassProxyAuth {
					t.Errorf("AttemptError = {Exit %s, Class %s}, want {auth-bad, %s}", ae.Exit, ae.Verdict.Class, pool.ClassProxyAuth)
				}
			case tt.noCreds:
				// Plain HTTP: the proxy's 407 is a response, returned with a nil error.
				if r.err != nil || r.status != http.StatusProxyAuthRequired || r.exit != "auth-bad" {
					t.Fatalf("first request = %d via %q, err %v; want 407 via auth-bad", r.status, r.exit, r.err)
				}
			default:
				// Plain HTTP, wrong password: tinyproxy 1.11.1 answers 401, newer ones 407.
				if r.err != nil || r.exit != "auth-bad" || (r.status != 401 && r.status != 407) {
					t.Fatalf("first request = %d via %q, err %v; want 401 or 407 via auth-bad", r.status, r.exit, r.err)
				}
				if r.status == http.StatusProxyAuthRequired {
					tt.wantParkReq = 1 // a tinyproxy that answers 407 (pull request #549) parks it at once
				} else {
					t.Logf("tinyproxy answered wrong credentials %d over plain HTTP (%s): an origin's answer as far as the transport can tell", r.status, r.header.Get("Server"))
					if s := integExitStatus(t, tr.Pool().Snapshot(), "auth-bad"); s.Breaker.Parked {
						tt.wantParkReq = 1 // the transport learned to tell a proxy's 401 from the origin's
						break
					}
					// At the latest, the first CONNECT through it reveals the rejection.
					r = integGet(c, secure.URL)
					if r.err == nil {
						t.Fatalf("CONNECT with wrong credentials = %d via %s, want an error", r.status, r.exit)
					}
					if ae := integAttemptError(t, r.err); ae.Exit != "auth-bad" || ae.Verdict.Class != pool.ClassProxyAuth {
						t.Errorf("AttemptError = {Exit %s, Class %s}, want {auth-bad, %s}", ae.Exit, ae.Verdict.Class, pool.ClassProxyAuth)
					}
				}
			}

			s := tr.Pool().Snapshot()
			es := integExitStatus(t, s, "auth-bad")
			if es.Breaker.State != breaker.Open || !es.Breaker.Parked || es.Breaker.LastFailure != string(pool.ClassProxyAuth) {
				t.Fatalf("exit auth-bad: state %v, parked %t, last failure %q; want open, parked, %q",
					es.Breaker.State, es.Breaker.Parked, es.Breaker.LastFailure, pool.ClassProxyAuth)
			}
			for _, p := range s.Pairs {
				if p.Breaker.State != breaker.Closed {
					t.Errorf("pair (%s, %s) %v: an exit-scoped failure must not trip pairs", p.Exit, p.Origin, p.Breaker.State)
				}
			}
			if got := obs.attempts("auth-bad"); got != tt.wantParkReq {
				t.Errorf("attempts through auth-bad before it was parked = %d, want %d", got, tt.wantParkReq)
			}

			// Parked for every origin: the one that saw the rejection, the other, and a new one.
			for i, u := range []string{first, other, plain2.URL, first, other, plain2.URL} {
				if r := integMustGet(t, c, u); r.exit != "good" {
					t.Errorf("request %d to %s after the park went via %s, want good", i, u, r.exit)
				}
			}
			if got := obs.attempts("auth-bad"); got != tt.wantParkReq {
				t.Errorf("attempts through auth-bad in all = %d, want %d: a parked exit must take nothing", got, tt.wantParkReq)
			}
		})
	}
}

// TestIntegRefusedGatewayParksExit: an exit where nothing listens is parked (proxy_refused) by its
// first refused dial, over plain HTTP or CONNECT, and takes nothing more for any origin.
func TestIntegRefusedGatewayParksExit(t *testing.T) {
	t.Parallel()
	for _, connect := range []bool{false, true} {
		name := "plain first"
		if connect {
			name = "connect first"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			plain := integOrigin(t, false, nil)
			plain2 := integOrigin(t, false, nil)
			secure := integOrigin(t, true, nil)
			addr, err := proxytest.ClosedAddr()
			if err != nil {
				t.Fatal(err)
			}
			refused := integExit(t, &url.URL{Scheme: "http", Host: addr}, "refused").WithTier(0)
			good := integExit(t, servertest.Tinyproxy(t, servertest.TinyproxyConfig{}), "good").WithTier(1)
			obs := &integObserver{}
			fc := newIntegClock()
			tr, c := integNew(t, []*httptest.Server{secure},
				pool.WithExits(refused, good), pool.WithClock(fc), transport.WithObserver(obs))

			first := plain.URL
			if connect {
				first = secure.URL
			}
			r := integGet(c, first)
			if r.err == nil {
				t.Fatalf("first request = %d via %s, want an error", r.status, r.exit)
			}
			if ae := integAttemptError(t, r.err); ae.Exit != "refused" || ae.Verdict.Class != pool.ClassProxyRefused ||
				ae.Verdict.Outcome != pool.Permanent || ae.Verdict.Scope != pool.ScopeExit {
				t.Errorf("AttemptError = {Exit %s, Verdict %+v}, want refused, permanent exit-scoped %s", ae.Exit, ae.Verdict, pool.ClassProxyRefused)
			}
			es := integExitStatus(t, tr.Pool().Snapshot(), "refused")
			if es.Breaker.State != breaker.Open || !es.Breaker.Parked || es.Breaker.LastFailure != string(pool.ClassProxyRefused) {
				t.Fatalf("exit refused: state %v, parked %t, last failure %q; want open, parked, %q",
					es.Breaker.State, es.Breaker.Parked, es.Breaker.LastFailure, pool.ClassProxyRefused)
			}
			for i, u := range []string{plain.URL, secure.URL, plain2.URL, plain.URL, secure.URL, plain2.URL} {
				if r := integMustGet(t, c, u); r.exit != "good" {
					t.Errorf("request %d to %s went via %s, want good", i, u, r.exit)
				}
			}
			if got := obs.attempts("refused"); got != 1 {
				t.Errorf("attempts through the refused exit = %d, want 1", got)
			}
		})
	}
}

// TestIntegRateLimitOpensOnlyThePair: origin A answers 429 with Retry-After: 30 to requests that
// come through tinyproxy X (bound to 127.0.0.5); origin B always answers 200. The 429 opens only
// the (X, A) pair: X keeps serving B, A is served by Y meanwhile, and the pair stays OPEN until the
// fake clock passes 30 s plus jitter. Then, A having stopped rate-limiting, one probe through X
// closes the pair, and X carries A's traffic again.
func TestIntegRateLimitOpensOnlyThePair(t *testing.T) {
	t.Parallel()
	const xIP, yIP = "127.0.0.5", "127.0.0.6"
	var limiting atomic.Bool
	limiting.Store(true)
	var limited atomic.Int64
	originA := integOrigin(t, true, func(w http.ResponseWriter, _ *http.Request, from string) bool {
		if from == xIP && limiting.Load() {
			limited.Add(1)
			w.Header().Set("Retry-After", "30")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return true
		}
		return false
	})
	originB := integOrigin(t, false, nil)
	a, b := integOriginKey(originA), integOriginKey(originB)
	x := integExit(t, servertest.Tinyproxy(t, servertest.TinyproxyConfig{Bind: xIP}), "X").WithTier(0)
	y := integExit(t, servertest.Tinyproxy(t, servertest.TinyproxyConfig{Bind: yIP}), "Y").WithTier(1)
	obs := &integObserver{}
	fc := newIntegClock()
	tr, c := integNew(t, []*httptest.Server{originA},
		pool.WithExits(x, y), pool.WithClock(fc), transport.WithObserver(obs),
		pool.WithPairSettings(breaker.Settings{Rand: integHalf}))
	ipOf := map[string]string{"X": xIP, "Y": yIP}
	check := func(step string, u, wantExit string) {
		t.Helper()
		r := integMustGet(t, c, u)
		if r.exit != wantExit || r.from != ipOf[wantExit] {
			t.Errorf("%s: Get(%s) via %s (origin saw %s), want via %s (%s)", step, u, r.exit, r.from, wantExit, ipOf[wantExit])
		}
	}

	// X is in tier 0: the first request for A goes through it and is rate-limited.
	r := integGet(c, originA.URL)
	if r.err != nil || r.status != http.StatusTooManyRequests || r.exit != "X" {
		t.Fatalf("first Get(A) = %d via %q, err %v; want 429 via X", r.status, r.exit, r.err)
	}
	s := tr.Pool().Snapshot()
	xa, _ := integPairState(s, "X", a)
	wantProbe := integT0.Add(integJittered(30 * time.Second))
	if xa.State != breaker.Open || xa.LastFailure != string(pool.ClassRateLimited) || !xa.NextProbe.Equal(wantProbe) {
		t.Fatalf("pair (X, A) = %v, last failure %q, next probe %v; want open, %s, %v",
			xa.State, xa.LastFailure, xa.NextProbe, pool.ClassRateLimited, wantProbe)
	}

	// Only (X, A) is open: X keeps serving B, Y serves A.
	for i := range 4 {
		check(fmt.Sprintf("t0 step %d, A", i), originA.URL, "Y")
		check(fmt.Sprintf("t0 step %d, B", i), originB.URL, "X")
	}
	s = tr.Pool().Snapshot()
	for _, p := range s.Pairs {
		if open := p.Exit == "X" && p.Origin == a; open != (p.Breaker.State == breaker.Open) {
			t.Errorf("pair (%s, %s) = %v; want only (X, %s) open", p.Exit, p.Origin, p.Breaker.State, a)
		}
	}
	for _, e := range s.Exits {
		if e.Breaker.State != breaker.Closed {
			t.Errorf("exit %s = %v: a 429 is the pair's business, not the exit's", e.Exit, e.Breaker.State)
		}
	}

	// Just before the window ends the pair is still open, even though 30 s have passed.
	fc.Set(wantProbe.Add(-time.Millisecond))
	check("just before the probe, A", originA.URL, "Y")
	check("just before the probe, B", originB.URL, "X")
	if xa, _ := integPairState(tr.Pool().Snapshot(), "X", a); xa.State != breaker.Open {
		t.Fatalf("pair (X, A) 1 ms before its probe = %v, want open", xa.State)
	}

	// A stops rate-limiting X; at the end of the window the next request for A probes X.
	limiting.Store(false)
	fc.Set(wantProbe)
	if xa, _ := integPairState(tr.Pool().Snapshot(), "X", a); xa.State != breaker.HalfOpen {
		t.Fatalf("pair (X, A) at its probe time = %v, want half_open", xa.State)
	}
	check("probe, A", originA.URL, "X")
	if last := obs.last(t); !last.Probe || last.Exit.Label() != "X" || last.Verdict.Outcome != pool.Success {
		t.Errorf("probe attempt = {Exit %s, Probe %t, Outcome %v}, want {X, true, success}", last.Exit, last.Probe, last.Verdict.Outcome)
	}
	if xa, _ := integPairState(tr.Pool().Snapshot(), "X", a); xa.State != breaker.Closed {
		t.Fatalf("pair (X, A) after a good probe = %v, want closed", xa.State)
	}
	for range 16 { // tier 0's slow start for A (30 s): Y shares A meanwhile
		fc.Advance(2 * time.Second)
		integMustGet(t, c, originA.URL)
	}
	for i := range 4 {
		check(fmt.Sprintf("recovered step %d, A", i), originA.URL, "X")
	}
	if got := limited.Load(); got != 1 {
		t.Errorf("origin A answered 429 %d times, want 1: an open pair must send nothing", got)
	}
	s = tr.Pool().Snapshot()
	for _, k := range [][2]string{{"X", a}, {"X", b}, {"Y", a}} {
		if p, ok := integPairState(s, k[0], k[1]); ok && p.State != breaker.Closed {
			t.Errorf("pair (%s, %s) at the end = %v, want closed", k[0], k[1], p.State)
		}
	}
}

// TestIntegRecoveredExitCarriesTrafficAgain: a tinyproxy crashes (SIGKILL); its exit is parked by
// the refused dials that follow while a tier-1 exit takes the traffic. The tinyproxy is started
// again on the same port, but the exit stays parked until the fake clock reaches its probe time;
// then one probe goes through it, succeeds, and the exit carries traffic again.
func TestIntegRecoveredExitCarriesTrafficAgain(t *testing.T) {
	t.Parallel()
	const xIP, yIP = "127.0.0.7", "127.0.0.8"
	plain := integOrigin(t, false, nil)
	secure := integOrigin(t, true, nil)
	y := integExit(t, servertest.Tinyproxy(t, servertest.TinyproxyConfig{Bind: yIP}), "Y").WithTier(1)
	xp := servertest.StartTinyproxy(t, servertest.TinyproxyConfig{Bind: xIP})
	x := integExit(t, xp.URL(), "X").WithTier(0)
	obs := &integObserver{}
	fc := newIntegClock()
	const parkFor = time.Minute
	exitSettings := pool.DefaultExitSettings()
	exitSettings.ParkFor, exitSettings.Rand = parkFor, integHalf
	tr, c := integNew(t, []*httptest.Server{secure},
		pool.WithExits(x, y), pool.WithClock(fc), transport.WithObserver(obs),
		pool.WithExitSettings(exitSettings))
	ipOf := map[string]string{"X": xIP, "Y": yIP}
	check := func(step, u, wantExit string) {
		t.Helper()
		r := integMustGet(t, c, u)
		if r.exit != wantExit || r.from != ipOf[wantExit] {
			t.Errorf("%s: Get(%s) via %s (origin saw %s), want via %s (%s)", step, u, r.exit, r.from, wantExit, ipOf[wantExit])
		}
	}

	// Healthy: X (tier 0) carries everything, and keeps connections to both origins open.
	for i := range 3 {
		check(fmt.Sprintf("healthy %d, plain", i), plain.URL, "X")
		check(fmt.Sprintf("healthy %d, https", i), secure.URL, "X")
	}

	// X crashes. Requests fail through it (perhaps first on a connection it had kept) until a
	// refused dial parks it.
	xp.Kill()
	var failedAt time.Time
	for i := 0; ; i++ {
		if i == 10 {
			t.Fatalf("exit X not parked after %d requests through a dead tinyproxy: %+v", i, integExitStatus(t, tr.Pool().Snapshot(), "X"))
		}
		u := plain.URL
		if i%2 == 1 {
			u = secure.URL
		}
		r := integGet(c, u)
		if r.err == nil {
			t.Fatalf("request %d through a dead tinyproxy = %d via %s, want an error", i, r.status, r.exit)
		}
		ae := integAttemptError(t, r.err)
		if ae.Exit != "X" {
			t.Fatalf("request %d failed via %s, want X", i, ae.Exit)
		}
		t.Logf("request %d through the dead X: %s", i, ae.Verdict.Class)
		if ae.Verdict.Class == pool.ClassProxyRefused {
			failedAt = fc.Now()
			break
		}
	}
	es := integExitStatus(t, tr.Pool().Snapshot(), "X")
	wantProbe := failedAt.Add(integJittered(parkFor))
	if es.Breaker.State != breaker.Open || !es.Breaker.Parked || !es.Breaker.NextProbe.Equal(wantProbe) {
		t.Fatalf("exit X after a refused dial: %v, parked %t, next probe %v; want open, parked, %v",
			es.Breaker.State, es.Breaker.Parked, es.Breaker.NextProbe, wantProbe)
	}
	check("outage, plain", plain.URL, "Y")
	check("outage, https", secure.URL, "Y")

	// X comes back on the same port. The breaker does not know yet: Y serves until the probe time.
	before := obs.attempts("X")
	xp.Restart()
	fc.Set(wantProbe.Add(-time.Millisecond))
	check("restarted, before the probe, plain", plain.URL, "Y")
	check("restarted, before the probe, https", secure.URL, "Y")
	if got := obs.attempts("X"); got != before {
		t.Errorf("attempts through parked X = %d, want %d", got, before)
	}

	fc.Set(wantProbe)
	check("probe", secure.URL, "X")
	if last := obs.last(t); !last.Probe || last.Exit.Label() != "X" || last.ExitStateAfter != breaker.Closed {
		t.Errorf("probe attempt = {Exit %s, Probe %t, exit after %v}, want {X, true, closed}", last.Exit, last.Probe, last.ExitStateAfter)
	}
	for i := range 3 {
		check(fmt.Sprintf("recovered %d, plain", i), plain.URL, "X")
		check(fmt.Sprintf("recovered %d, https", i), secure.URL, "X")
	}
	if es := integExitStatus(t, tr.Pool().Snapshot(), "X"); es.Breaker.State != breaker.Closed {
		t.Errorf("exit X after recovery = %v, want closed", es.Breaker.State)
	}
}

// TestIntegCredentialsNeverLeak runs traffic through exits that all carry one distinctive
// password: one that works, one a tinyproxy rejects, one where nothing listens and one that hangs
// past the header timeout. The password, and its Basic encoding, appears in no error, observer
// event, snapshot, exit rendering or log line.
//
// Not parallel: it redirects the standard logger.
func TestIntegCredentialsNeverLeak(t *testing.T) {
	const user, canary = "leaker", "pw-LEAK-CANARY-7f3a"
	secrets := []string{canary, base64.StdEncoding.EncodeToString([]byte(user + ":" + canary))}

	logs := &integLockedBuffer{}
	prevOut, prevFlags := log.Writer(), log.Flags()
	log.SetOutput(logs)
	t.Cleanup(func() { log.SetOutput(prevOut); log.SetFlags(prevFlags) })

	plain := integOrigin(t, false, nil)
	secure := integOrigin(t, true, nil)
	goodURL := servertest.Tinyproxy(t, servertest.TinyproxyConfig{User: user, Pass: canary})
	rejectingURL := servertest.Tinyproxy(t, servertest.TinyproxyConfig{User: user, Pass: "the-right-one"})
	closed, err := proxytest.ClosedAddr()
	if err != nil {
		t.Fatal(err)
	}
	hang, err := proxytest.Start(proxytest.Config{Name: "hang", Hang: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hang.Close() })

	withCanary := func(host string) *url.URL {
		return &url.URL{Scheme: "http", Host: host, User: url.UserPassword(user, canary)}
	}
	// No WithLabel: the default labels are the redacted URLs, which is what must hold.
	exits := []*pool.Exit{
		integExit(t, withCanary(closed), "").WithTier(0),
		integExit(t, withCanary(rejectingURL.Host), "").WithTier(1),
		integExit(t, withCanary(hang.Addr()), "").WithTier(2),
		integExit(t, withCanary(goodURL.Host), "").WithTier(3),
	}
	// Parse the provider format too, which takes the password from a plain string.
	parsed, err := pool.ParseExit(goodURL.Hostname() + ":" + goodURL.Port() + ":" + user + ":" + canary)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(parsed.ProxyURL().String(), canary) {
		t.Fatalf("ParseExit lost the password: the test would prove nothing")
	}
	obs := &integObserver{}
	fc := newIntegClock()
	tr, c := integNew(t, []*httptest.Server{secure},
		pool.WithExits(exits...), pool.WithClock(fc), transport.WithObserver(obs),
		pool.WithPairSettings(breaker.Settings{FailureThreshold: 1}),
		transport.WithHeaderTimeout(time.Second))

	var outputs []string
	record := func(err error) {
		for e := err; e != nil; e = errors.Unwrap(e) {
			outputs = append(outputs, e.Error(), fmt.Sprintf("%v", e), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e))
		}
	}
	classes := map[pool.Class]int{}
	// Tiers make the order certain: plain → refused (parked); https → rejected CONNECT (parked);
	// plain and https → hang (each pair opens after one timeout); then the good exit.
	for i, u := range []string{plain.URL, secure.URL, plain.URL, secure.URL, plain.URL, secure.URL, plain.URL, secure.URL} {
		r := integGet(c, u)
		if r.err != nil {
			record(r.err)
			classes[integAttemptError(t, r.err).Verdict.Class]++
			continue
		}
		if r.status != http.StatusOK {
			t.Errorf("request %d = %d via %s, want 200 or an error", i, r.status, r.exit)
		}
		classes[pool.ClassOK]++
	}
	for _, class := range []pool.Class{pool.ClassProxyRefused, pool.ClassProxyAuth, pool.ClassTimeout, pool.ClassOK} {
		if classes[class] == 0 {
			t.Errorf("no request ended %s (classes %v): the test must exercise every failing exit", class, classes)
		}
	}
	// With the working exit gone, requests are refused without an attempt.
	if err := tr.Pool().Remove(exits[3].Label()); err != nil {
		t.Fatalf("Remove(%s) = %v", exits[3].Label(), err)
	}
	r := integGet(c, plain.URL)
	if !errors.Is(r.err, pool.ErrNoHealthyExit) {
		t.Errorf("request with no exit ready = %d, err %v; want ErrNoHealthyExit", r.status, r.err)
	}
	record(r.err)
	// A caller that removes an exit by its dialing URL (or its proxy-list line) instead of its
	// label gets an error that must not echo the password it passed.
	err = tr.Pool().Remove(exits[3].ProxyURL().String())
	if err == nil {
		t.Errorf("Remove(dialing URL) = nil, want an unknown-label error")
	}
	record(err)

	for _, e := range append(exits, parsed) {
		outputs = append(outputs, e.String(), e.Label(), e.GoString(),
			fmt.Sprintf("%v", e), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e), fmt.Sprintf("%s", e), fmt.Sprintf("%q", e))
		js, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		outputs = append(outputs, string(js))
	}
	outputs = append(outputs, fmt.Sprintf("%v %+v %#v", exits, exits, exits))
	snap := tr.Pool().Snapshot()
	js, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	outputs = append(outputs, string(js), fmt.Sprintf("%+v", snap), fmt.Sprintf("%#v", snap))
	obs.mu.Lock()
	outputs = append(outputs, obs.rendered...)
	events := len(obs.rendered)
	obs.mu.Unlock()
	tr.Close()
	outputs = append(outputs, logs.String())
	if events == 0 {
		t.Error("the observer saw no events")
	}

	for _, out := range outputs {
		for _, secret := range secrets {
			if strings.Contains(out, secret) {
				t.Errorf("a credential leaked: %q", out)
			}
		}
	}
	t.Logf("checked %d renderings (%d observer events); classes %v", len(outputs), events/3, classes)
}

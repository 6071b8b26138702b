package transport_test

// Integration tests through in-process SOCKS5 proxies (internal/proxytest with Config.SOCKS5) on
// 127.0.0.1: socks5:// and socks5h:// exits really route through the proxy they name, over plain
// HTTP and HTTP/2, and SOCKS failures are classified and land on the right breaker. Breaker time is
// a fake clock; nothing sleeps waiting for a state change.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// socksUser and socksPass are the credentials every authenticating SOCKS proxy here demands.
// socksPass is a canary: it must appear in no error.
const socksUser, socksPass = "sockuser", "pw-SOCKS-CANARY-91c2"

// socksOrigin starts an origin that answers 200 "proto=P via=NAME", NAME being the proxy reg says
// carried the request ("-" for none), and sets integFromHeader to the proxy's name too. With h2 it
// speaks TLS and offers HTTP/2.
func socksOrigin(t *testing.T, reg *proxytest.Registry, h2 bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := reg.Lookup(r)
		if !ok {
			name = "-"
		}
		w.Header().Set(integFromHeader, name)
		fmt.Fprintf(w, "proto=%s via=%s", r.Proto, name)
	}))
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// socksProxy starts a SOCKS5 proxytest proxy named name that demands socksUser and socksPass and
// records its upstream connections in reg.
func socksProxy(t *testing.T, name string, reg *proxytest.Registry) *proxytest.Proxy {
	t.Helper()
	p, err := proxytest.Start(proxytest.Config{Name: name, SOCKS5: true, User: socksUser, Pass: socksPass, Registry: reg})
	if err != nil {
		t.Fatalf("proxytest.Start(%s) = %v", name, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// socksExit is the exit scheme://user:pass@addr labelled label.
func socksExit(t *testing.T, scheme, addr, user, pass, label string) *pool.Exit {
	t.Helper()
	u := &url.URL{Scheme: scheme, Host: addr}
	if user != "" {
		u.User = url.UserPassword(user, pass)
	}
	return integExit(t, u, label)
}

// socksLocalhostIsIPv4 skips the test unless this machine resolves "localhost" to 127.0.0.1 first:
// the socks5 exit dials the first address the local resolver gives, and the origins listen on
// 127.0.0.1 only.
func socksLocalhostIsIPv4(t *testing.T) {
	t.Helper()
	ips, err := net.DefaultResolver.LookupIPAddr(t.Context(), "localhost")
	if err != nil || len(ips) == 0 || !ips[0].IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Skipf("localhost resolves to %v, %v here; the test needs 127.0.0.1 first", ips, err)
	}
}

// socksNoSecret fails the test if err, or anything it wraps, shows socksPass.
func socksNoSecret(t *testing.T, err error) {
	t.Helper()
	for e := err; e != nil; e = errors.Unwrap(e) {
		for _, s := range []string{e.Error(), fmt.Sprintf("%v", e), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e)} {
			if strings.Contains(s, socksPass) {
				t.Errorf("the SOCKS password leaked into an error: %q", s)
			}
		}
	}
}

// TestSOCKSRoutingTruth: through three authenticating SOCKS5 proxies, picked at random, requests
// to a plain HTTP origin addressed by name (http://localhost:PORT/) and to an HTTPS origin
// speaking HTTP/2 all succeed, and every response comes through the proxy the origin saw: the
// exit ExitFromResponse names is the proxy proxytest.Registry says dialed the origin. socks5 exits
// resolve "localhost" themselves and send the proxy an address; socks5h exits send the name.
func TestSOCKSRoutingTruth(t *testing.T) {
	t.Parallel()
	socksLocalhostIsIPv4(t)
	for _, scheme := range []string{pool.SchemeSOCKS5, pool.SchemeSOCKS5H} {
		t.Run(scheme, func(t *testing.T) {
			t.Parallel()
			reg := &proxytest.Registry{}
			plain := socksOrigin(t, reg, false)
			secure := socksOrigin(t, reg, true)
			_, port, _ := net.SplitHostPort(plain.Listener.Addr().String())
			plainURL := "http://localhost:" + port + "/"

			names := []string{scheme + "-a", scheme + "-b", scheme + "-c"}
			proxies := map[string]*proxytest.Proxy{}
			var exits []*pool.Exit
			for _, name := range names {
				p := socksProxy(t, name, reg)
				proxies[name] = p
				exits = append(exits, socksExit(t, scheme, p.Addr(), socksUser, socksPass, name))
			}
			fc := newIntegClock()
			tr, c := integNew(t, []*httptest.Server{secure}, pool.WithExits(exits...), pool.WithClock(fc),
				pool.WithSelection(pool.Random), pool.WithSeed(1))

			const n = 30
			used := map[string]int{}
			for i := range n {
				u, wantProto := plainURL, 1
				if i%2 == 1 {
					u, wantProto = secure.URL, 2
				}
				r := integMustGet(t, c, u)
				if r.proto != wantProto {
					t.Errorf("request %d to %s via %s: ProtoMajor = %d, want %d", i, u, r.exit, r.proto, wantProto)
				}
				if r.from != r.exit {
					t.Errorf("request %d to %s: ExitFromResponse = %s, but the origin saw it come from proxy %q (body %q)", i, u, r.exit, r.from, r.body)
				}
				used[r.exit]++
			}
			for _, name := range names {
				if used[name] == 0 {
					t.Errorf("exit %s carried no request of %d: used = %v", name, n, used)
				}
				p := proxies[name]
				if p.Connects() == 0 || p.Rejected() != 0 || p.Requests() != 0 {
					t.Errorf("proxy %s: Connects, Rejected, Requests = %d, %d, %d; want > 0, 0, 0",
						name, p.Connects(), p.Rejected(), p.Requests())
				}
			}
			for _, e := range tr.Pool().Snapshot().Exits {
				if e.Breaker.State != breaker.Closed || e.Breaker.Trips != 0 {
					t.Errorf("exit %s: state %v, trips %d; want closed, 0", e.Exit, e.Breaker.State, e.Breaker.Trips)
				}
			}
			t.Logf("requests per exit: %v", used)
		})
	}
}

// TestSOCKSWrongPasswordParksExit: a SOCKS5 proxy that rejects the exit's credentials (RFC 1929
// status 0x01), or that wants credentials the exit does not send ("no acceptable methods"), fails
// the attempt with an *AttemptError classified permanent, exit-scoped proxy_auth; the exit is
// parked for every origin after that one attempt, and the password appears in no error.
func TestSOCKSWrongPasswordParksExit(t *testing.T) {
	t.Parallel()
	for _, scheme := range []string{pool.SchemeSOCKS5, pool.SchemeSOCKS5H} {
		for _, noCreds := range []bool{false, true} {
			name := scheme + "/wrong password"
			if noCreds {
				name = scheme + "/no credentials"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				reg := &proxytest.Registry{}
				plain := socksOrigin(t, reg, false)
				secure := socksOrigin(t, reg, true)
				rejecting := socksProxy(t, "rejecting", reg)
				good := socksProxy(t, "good", reg)
				user, pass := socksUser, "not-"+socksPass
				if noCreds {
					user, pass = "", ""
				}
				exits := []*pool.Exit{
					socksExit(t, scheme, rejecting.Addr(), user, pass, "bad").WithTier(0),
					socksExit(t, scheme, good.Addr(), socksUser, socksPass, "good").WithTier(1),
				}
				obs := &integObserver{}
				fc := newIntegClock()
				tr, c := integNew(t, []*httptest.Server{secure},
					pool.WithExits(exits...), pool.WithClock(fc), transport.WithObserver(obs))

				r := integGet(c, plain.URL)
				if r.err == nil {
					t.Fatalf("request through the rejecting proxy = %d via %s, want an error", r.status, r.exit)
				}
				socksNoSecret(t, r.err)
				ae := integAttemptError(t, r.err)
				want := pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}
				if ae.Exit != "bad" || ae.Verdict != want {
					t.Errorf("AttemptError = {Exit %s, Verdict %+v}, want {bad, %+v} (error: %v)", ae.Exit, ae.Verdict, want, r.err)
				}
				if got := rejecting.Rejected(); got != 1 {
					t.Errorf("rejecting proxy: Rejected() = %d, want 1", got)
				}

				es := integExitStatus(t, tr.Pool().Snapshot(), "bad")
				if es.Breaker.State != breaker.Open || !es.Breaker.Parked || es.Breaker.LastFailure != string(pool.ClassProxyAuth) {
					t.Fatalf("exit bad: state %v, parked %t, last failure %q; want open, parked, %q",
						es.Breaker.State, es.Breaker.Parked, es.Breaker.LastFailure, pool.ClassProxyAuth)
				}
				for i, u := range []string{plain.URL, secure.URL, plain.URL, secure.URL} {
					if r := integMustGet(t, c, u); r.exit != "good" || r.from != "good" {
						t.Errorf("request %d to %s after the park went via %s (origin saw %s), want good", i, u, r.exit, r.from)
					}
				}
				if got := obs.attempts("bad"); got != 1 {
					t.Errorf("attempts through the parked exit = %d, want 1", got)
				}
			})
		}
	}
}

// TestSOCKSRefusedGatewayParksExit: a SOCKS5 exit where nothing listens is parked (permanent,
// exit-scoped proxy_refused) by its first refused dial.
func TestSOCKSRefusedGatewayParksExit(t *testing.T) {
	t.Parallel()
	for _, scheme := range []string{pool.SchemeSOCKS5, pool.SchemeSOCKS5H} {
		t.Run(scheme, func(t *testing.T) {
			t.Parallel()
			reg := &proxytest.Registry{}
			plain := socksOrigin(t, reg, false)
			closed, err := proxytest.ClosedAddr()
			if err != nil {
				t.Fatal(err)
			}
			good := socksProxy(t, "good", reg)
			exits := []*pool.Exit{
				socksExit(t, scheme, closed, socksUser, socksPass, "refused").WithTier(0),
				socksExit(t, scheme, good.Addr(), socksUser, socksPass, "good").WithTier(1),
			}
			obs := &integObserver{}
			fc := newIntegClock()
			tr, c := integNew(t, nil, pool.WithExits(exits...), pool.WithClock(fc), transport.WithObserver(obs))

			r := integGet(c, plain.URL)
			if r.err == nil {
				t.Fatalf("request through the refused gateway = %d via %s, want an error", r.status, r.exit)
			}
			socksNoSecret(t, r.err)
			ae := integAttemptError(t, r.err)
			want := pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyRefused}
			if ae.Exit != "refused" || ae.Verdict != want {
				t.Errorf("AttemptError = {Exit %s, Verdict %+v}, want {refused, %+v} (error: %v)", ae.Exit, ae.Verdict, want, r.err)
			}
			es := integExitStatus(t, tr.Pool().Snapshot(), "refused")
			if es.Breaker.State != breaker.Open || !es.Breaker.Parked || es.Breaker.LastFailure != string(pool.ClassProxyRefused) {
				t.Fatalf("exit refused: state %v, parked %t, last failure %q; want open, parked, %q",
					es.Breaker.State, es.Breaker.Parked, es.Breaker.LastFailure, pool.ClassProxyRefused)
			}
			if r := integMustGet(t, c, plain.URL); r.exit != "good" || r.from != "good" {
				t.Errorf("request after the park went via %s (origin saw %s), want good", r.exit, r.from)
			}
			if got := obs.attempts("refused"); got != 1 {
				t.Errorf("attempts through the refused exit = %d, want 1", got)
			}
		})
	}
}

// TestSOCKSOriginDNSFailureIsNeutral: a socks5 exit resolves the origin's name itself, so a name
// that does not resolve (under the reserved .invalid TLD) fails before the proxy hears of it: a
// neutral, origin-scoped origin_dns verdict that leaves the exit and its pair CLOSED, and the exit
// carries the next request. A socks5h exit sends the same name to the proxy instead, which refuses
// it: the difference shows which side resolved the name.
func TestSOCKSOriginDNSFailureIsNeutral(t *testing.T) {
	t.Parallel()
	reg := &proxytest.Registry{}
	plain := socksOrigin(t, reg, false)
	local := socksProxy(t, "local-dns", reg)
	remote := socksProxy(t, "remote-dns", reg)
	exits := []*pool.Exit{
		socksExit(t, pool.SchemeSOCKS5, local.Addr(), socksUser, socksPass, "local-dns").WithTier(0),
		socksExit(t, pool.SchemeSOCKS5H, remote.Addr(), socksUser, socksPass, "remote-dns").WithTier(1),
	}
	obs := &integObserver{}
	fc := newIntegClock()
	// No real DNS in tests: a resolver whose server cannot be reached fails every lookup that
	// /etc/hosts does not answer, without a packet leaving the machine.
	offline := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no DNS in tests")
	}}
	tr, c := integNew(t, nil, pool.WithExits(exits...), pool.WithClock(fc), transport.WithObserver(obs),
		transport.WithResolver(offline))

	const unresolvable = "http://no-such-origin.invalid/"
	r := integGet(c, unresolvable)
	if r.err == nil {
		t.Fatalf("Get(%s) = %d via %s, want an error", unresolvable, r.status, r.exit)
	}
	socksNoSecret(t, r.err)
	ae := integAttemptError(t, r.err)
	want := pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassOriginDNS}
	if ae.Exit != "local-dns" || ae.Verdict != want {
		t.Errorf("AttemptError = {Exit %s, Verdict %+v}, want {local-dns, %+v} (error: %v)", ae.Exit, ae.Verdict, want, r.err)
	}
	var dnsErr *net.DNSError
	if !errors.As(r.err, &dnsErr) {
		t.Errorf("error = %v, want it to wrap the *net.DNSError", r.err)
	}
	if c, j := local.Connects(), local.Rejected(); c != 0 || j != 0 {
		t.Errorf("local-dns proxy: Connects, Rejected = %d, %d; want 0, 0 (the name never reached it)", c, j)
	}

	s := tr.Pool().Snapshot()
	es := integExitStatus(t, s, "local-dns")
	if es.Breaker.State != breaker.Closed || es.Breaker.Parked || es.Breaker.Trips != 0 {
		t.Errorf("exit local-dns: state %v, parked %t, trips %d; want closed, not parked, 0", es.Breaker.State, es.Breaker.Parked, es.Breaker.Trips)
	}
	if ps, ok := integPairState(s, "local-dns", "no-such-origin.invalid"); ok && ps.State != breaker.Closed {
		t.Errorf("pair (local-dns, no-such-origin.invalid): state %v, want closed", ps.State)
	}
	if r := integMustGet(t, c, plain.URL); r.exit != "local-dns" || r.from != "local-dns" {
		t.Errorf("next request went via %s (origin saw %s), want local-dns", r.exit, r.from)
	}

	// The socks5h exit hands the name over; the proxy refuses it (a name other than localhost is not
	// loopback), so it never reaches a resolver on this side.
	if err := tr.Pool().Remove("local-dns"); err != nil {
		t.Fatalf("Remove(local-dns) = %v", err)
	}
	r = integGet(c, unresolvable)
	if r.err == nil {
		t.Fatalf("Get(%s) via socks5h = %d via %s, want an error", unresolvable, r.status, r.exit)
	}
	socksNoSecret(t, r.err)
	ae = integAttemptError(t, r.err)
	if ae.Exit != "remote-dns" || ae.Verdict.Class == pool.ClassOriginDNS {
		t.Errorf("AttemptError = {Exit %s, Verdict %+v}, want remote-dns, not %s: the proxy resolves for socks5h", ae.Exit, ae.Verdict, pool.ClassOriginDNS)
	}
	if got := remote.Rejected(); got != 1 {
		t.Errorf("remote-dns proxy: Rejected() = %d, want 1 (the name reached it and was refused)", got)
	}
	t.Logf("socks5h, name refused by the proxy: %+v (%v)", ae.Verdict, r.err)
}

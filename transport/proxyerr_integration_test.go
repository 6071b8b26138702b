package transport_test

// Who failed — the proxy or the origin — against a real squid and a real tinyproxy
// (internal/servertest), over plain HTTP and CONNECT: a target the proxy refuses parks that pair
// only, a target it cannot reach counts half against the pair and feeds the origin guard, and a
// name that does not resolve never blames the exit.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/servertest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

var (
	integDenied     = pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopePair, Class: pool.ClassProxyDenied}
	integUpstream   = pool.Verdict{Outcome: pool.Transient, Scope: pool.ScopePair, Class: pool.ClassUpstream, Soft: true}
	integUnresolved = pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassOriginDNS}
)

// integJudged is what one request through the transport came to, and what the proxy answered.
type integJudged struct {
	attempted bool         // an attempt went out through an exit
	exit      string       // the exit that carried it
	verdict   pool.Verdict // the transport's verdict
	status    int          // the proxy's status: the response's, or the CONNECT answer's
	line      string       // its status line after the version
	header    http.Header  // its headers
	err       error
}

// answer describes what the proxy answered, for the test log.
func (j integJudged) answer() string {
	var b strings.Builder
	b.WriteString(j.line)
	for _, k := range slices.Sorted(maps.Keys(j.header)) {
		if k != "Date" {
			fmt.Fprintf(&b, "; %s: %s", k, strings.Join(j.header[k], ", "))
		}
	}
	return b.String()
}

// integJudge sends GET u through c, pinned to exit when it is not empty, reads the whole body, and
// returns the verdict and the proxy's answer.
func integJudge(t *testing.T, c *http.Client, u, exit string) integJudged {
	t.Helper()
	ctx := context.Background()
	if exit != "" {
		ctx = transport.ContextWithExit(ctx, exit)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		j := integJudged{err: err}
		var ae *transport.AttemptError
		if errors.As(err, &ae) {
			j.attempted, j.exit, j.verdict = true, ae.Exit, ae.Verdict
		}
		var pce *transport.ProxyConnectError
		if errors.As(err, &pce) {
			j.status, j.line, j.header = pce.StatusCode, pce.Status, pce.Header
		}
		return j
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	j := integJudged{attempted: true, status: resp.StatusCode, line: resp.Status, header: resp.Header}
	if e := transport.ExitFromResponse(resp); e != nil {
		j.exit = e.Label()
	}
	j.verdict, _ = transport.VerdictFromResponse(resp)
	return j
}

// integPort returns the port of srv.
func integPort(srv *httptest.Server) string {
	u, _ := url.Parse(srv.URL)
	return u.Port()
}

// integDeadPort returns a 127.0.0.1 port nothing listens on: one just freed.
func integDeadPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// integOriginOf is the origin key of u.
func integOriginOf(u string) string {
	p, _ := url.Parse(u)
	return transport.OriginHost(p)
}

// integExitClean fails the test unless the exit labelled label is CLOSED with no failure on record:
// nothing blamed it.
func integExitClean(t *testing.T, tr *transport.Transport, label string) {
	t.Helper()
	es := integExitStatus(t, tr.Pool().Snapshot(), label)
	if es.Breaker.State != breaker.Closed || es.Breaker.Parked || es.Breaker.LastFailure != "" {
		t.Errorf("exit %s: state %v, parked %t, last failure %q; want closed with no failure: the exit was blamed",
			label, es.Breaker.State, es.Breaker.Parked, es.Breaker.LastFailure)
	}
}

// integProxyDenies: the proxy behind proxyURL refuses deniedURL. The refusal parks that pair only:
// the exit carries another origin at once, and the pool refuses the denied origin without sending
// anything until the park ends.
func integProxyDenies(t *testing.T, proxyURL *url.URL, secure *httptest.Server, deniedURL, okURL string) {
	t.Helper()
	obs := &integObserver{}
	tr, c := integNew(t, []*httptest.Server{secure},
		pool.WithExits(integExit(t, proxyURL, "x-1")), pool.WithClock(newIntegClock()), transport.WithObserver(obs))

	j := integJudge(t, c, deniedURL, "")
	t.Logf("%s: the proxy answered %s", deniedURL, j.answer())
	if !j.attempted || j.exit != "x-1" || j.verdict != integDenied {
		t.Fatalf("GET %s = verdict %+v via %q (err %v), want %+v via x-1", deniedURL, j.verdict, j.exit, j.err, integDenied)
	}
	s := tr.Pool().Snapshot()
	if p, ok := integPairState(s, "x-1", integOriginOf(deniedURL)); !ok || !p.Parked || p.LastFailure != string(pool.ClassProxyDenied) {
		t.Errorf("pair (x-1, %s) = %+v, want parked by %s", integOriginOf(deniedURL), p, pool.ClassProxyDenied)
	}
	integExitClean(t, tr, "x-1")

	if r := integMustGet(t, c, okURL); r.exit != "x-1" {
		t.Errorf("GET %s after the refusal went via %q, want x-1: the exit serves other origins", okURL, r.exit)
	}
	j = integJudge(t, c, deniedURL, "")
	var nh *pool.NoHealthyExitError
	if j.attempted || !errors.As(j.err, &nh) {
		t.Errorf("GET %s again = attempted %t, err %v; want refused by the pool (*pool.NoHealthyExitError)", deniedURL, j.attempted, j.err)
	}
	if got := obs.attempts("x-1"); got != 2 {
		t.Errorf("attempts through x-1 = %d, want 2: the refused one and the other origin's", got)
	}
}

// integProxyCannotReach: the proxy behind proxyURL cannot reach deadURL. Each exit's failure counts
// half against its pair, blames no exit, and the origin guard, seeing three exits fail, marks the
// origin unhealthy; the exits carry another origin all along.
func integProxyCannotReach(t *testing.T, proxyURL *url.URL, secure *httptest.Server, deadURL, okURL string) {
	t.Helper()
	labels := []string{"x-1", "x-2", "x-3"}
	var exits []*pool.Exit
	for _, l := range labels {
		exits = append(exits, integExit(t, proxyURL, l))
	}
	tr, c := integNew(t, []*httptest.Server{secure}, pool.WithExits(exits...), pool.WithClock(newIntegClock()))
	origin := integOriginOf(deadURL)
	for i, label := range labels {
		j := integJudge(t, c, deadURL, label)
		if i == 0 {
			t.Logf("%s: the proxy answered %s", deadURL, j.answer())
		}
		if !j.attempted || j.exit != label || j.verdict != integUpstream {
			t.Fatalf("step %d: GET %s via %s = verdict %+v via %q (err %v), want %+v", i, deadURL, label, j.verdict, j.exit, j.err, integUpstream)
		}
		if i == 0 {
			p, _ := integPairState(tr.Pool().Snapshot(), label, origin)
			if p.State != breaker.Closed || p.FailuresInWindow != 0 || p.LastFailure != string(pool.ClassUpstream) {
				t.Errorf("pair (%s, %s) after one failure = %v, %d failures, last %q; want closed, half a failure (0), %q",
					label, origin, p.State, p.FailuresInWindow, p.LastFailure, pool.ClassUpstream)
			}
		}
		integExitClean(t, tr, label)
	}
	j := integJudge(t, c, deadURL, "")
	var ou *pool.OriginUnhealthyError
	if j.attempted || !errors.As(j.err, &ou) || ou.Origin != origin {
		t.Errorf("GET %s after three exits failed it = attempted %t, err %v; want the origin guard's *pool.OriginUnhealthyError", deadURL, j.attempted, j.err)
	}
	for _, label := range labels {
		if j := integJudge(t, c, okURL, label); j.err != nil || j.status != http.StatusOK || j.exit != label {
			t.Errorf("GET %s via %s = %d via %q, err %v; want 200 through it", okURL, label, j.status, j.exit, j.err)
		}
	}
}

// integNameUnresolved: the proxy behind proxyURL cannot resolve the name of u. Whatever the proxy
// says (want gives the verdict its answer calls for, failing the test for an answer it does not
// know), the exit is never blamed.
func integNameUnresolved(t *testing.T, proxyURL *url.URL, secure *httptest.Server, u string, want func(t *testing.T, j integJudged) pool.Verdict) {
	t.Helper()
	tr, c := integNew(t, []*httptest.Server{secure},
		pool.WithExits(integExit(t, proxyURL, "x-1")), pool.WithClock(newIntegClock()))
	j := integJudge(t, c, u, "")
	t.Logf("%s: the proxy answered %s", u, j.answer())
	if w := want(t, j); !j.attempted || j.verdict != w {
		t.Fatalf("GET %s = verdict %+v (err %v), want %+v", u, j.verdict, j.err, w)
	}
	integExitClean(t, tr, "x-1")
	if p, _ := integPairState(tr.Pool().Snapshot(), "x-1", integOriginOf(u)); p.State != breaker.Closed {
		t.Errorf("pair (x-1, %s) = %v after one lookup failure, want closed", integOriginOf(u), p.State)
	}
}

func TestIntegSquidAttribution(t *testing.T) {
	t.Parallel()
	plain := integOrigin(t, false, nil)
	secure := integOrigin(t, true, nil)
	sq := servertest.StartSquid(t, servertest.SquidConfig{Deny: []string{"denied.test"}})
	dead := integDeadPort(t)
	for _, tt := range []struct {
		scheme string
		origin *httptest.Server
	}{{"http", plain}, {"https", secure}} {
		port := integPort(tt.origin)
		t.Run(tt.scheme+"/acl denial", func(t *testing.T) {
			integProxyDenies(t, sq.URL(), secure, tt.scheme+"://denied.test:"+port+"/", tt.origin.URL)
		})
		t.Run(tt.scheme+"/connect failure", func(t *testing.T) {
			integProxyCannotReach(t, sq.URL(), secure, tt.scheme+"://127.0.0.1:"+dead+"/", tt.origin.URL)
		})
		t.Run(tt.scheme+"/name lookup failure", func(t *testing.T) {
			integNameUnresolved(t, sq.URL(), secure, tt.scheme+"://nosuch.invalid:"+port+"/", func(t *testing.T, j integJudged) pool.Verdict {
				// Squid 6.3 and later say ERR_DNS_FAIL; 4.x to 6.2 say ERR_READ_ERROR (plain) or
				// ERR_CANNOT_FORWARD (CONNECT) instead (squid bug 5294), which read as upstream.
				name, _, _ := strings.Cut(j.header.Get("X-Squid-Error"), " ")
				switch name {
				case "ERR_DNS_FAIL":
					return integUnresolved
				case "ERR_READ_ERROR", "ERR_CANNOT_FORWARD":
					return integUpstream
				}
				t.Fatalf("squid answered a failed lookup %q, X-Squid-Error %q: not an answer squid documents for it", j.line, name)
				return pool.Verdict{}
			})
		})
	}
}

func TestIntegTinyproxyAttribution(t *testing.T) {
	t.Parallel()
	plain := integOrigin(t, false, nil)
	secure := integOrigin(t, true, nil)
	tp := servertest.Tinyproxy(t, servertest.TinyproxyConfig{Filter: []string{"denied.test"}})
	securePort, _ := strconv.Atoi(integPort(secure))
	tpPorts := servertest.Tinyproxy(t, servertest.TinyproxyConfig{ConnectPorts: []int{securePort}})
	dead := integDeadPort(t)
	// A label longer than 63 bytes: the C library refuses the name without sending a query, so
	// tinyproxy's lookup fails without reaching any resolver.
	unresolvable := strings.Repeat("a", 64) + ".invalid"
	for _, tt := range []struct {
		scheme string
		origin *httptest.Server
	}{{"http", plain}, {"https", secure}} {
		port := integPort(tt.origin)
		t.Run(tt.scheme+"/filter denial", func(t *testing.T) {
			integProxyDenies(t, tp, secure, tt.scheme+"://denied.test:"+port+"/", tt.origin.URL)
		})
		t.Run(tt.scheme+"/connect failure", func(t *testing.T) {
			integProxyCannotReach(t, tp, secure, tt.scheme+"://127.0.0.1:"+dead+"/", tt.origin.URL)
		})
		t.Run(tt.scheme+"/name lookup failure", func(t *testing.T) {
			integNameUnresolved(t, tp, secure, tt.scheme+"://"+unresolvable+":"+port+"/", func(t *testing.T, j integJudged) pool.Verdict {
				// tinyproxy answers a failed lookup as it answers a refused connection.
				if j.line != "500 Unable to connect" || !strings.HasPrefix(j.header.Get("Server"), "tinyproxy/") {
					t.Fatalf("tinyproxy answered a failed lookup %q, Server %q; want 500 Unable to connect", j.line, j.header.Get("Server"))
				}
				return integUpstream
			})
		})
	}
	// ConnectPort: a CONNECT to a port tinyproxy does not allow is refused for that origin only.
	t.Run("https/connect port denial", func(t *testing.T) {
		integProxyDenies(t, tpPorts, secure, "https://127.0.0.1:"+integPort(plain)+"/", secure.URL)
	})
}

// integForger starts a plain HTTP origin that answers "/forged" with status line line and the
// header lines head, written raw (a custom reason phrase included), and anything else 200.
func integForger(t *testing.T, line string, head ...string) *httptest.Server {
	t.Helper()
	return integOrigin(t, false, func(w http.ResponseWriter, r *http.Request, _ string) bool {
		if r.URL.Path != "/forged" {
			return false
		}
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return true
		}
		defer conn.Close()
		fmt.Fprintf(buf, "HTTP/1.1 %s\r\n%s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", line, strings.Join(head, "\r\n"))
		buf.Flush()
		return true
	})
}

// TestIntegForgedProxyMarkersCostOnlyTheirPairs: an origin that answers with a proxy's markers —
// tinyproxy's Server header and reason phrase for refusing the client, squid's X-Squid-Error for
// shutting down, both of which blame the exit for every origin when the proxy says them to a
// CONNECT — passes for the proxy through a real tinyproxy and squid (both forward them), but only
// costs its own pair: the exit is not blamed and serves other origins.
func TestIntegForgedProxyMarkersCostOnlyTheirPairs(t *testing.T) {
	t.Parallel()
	other := integOrigin(t, false, nil)
	tp := servertest.Tinyproxy(t, servertest.TinyproxyConfig{})
	sq := servertest.StartSquid(t, servertest.SquidConfig{})
	for _, tt := range []struct {
		name  string
		proxy *url.URL
		line  string
		head  []string
		want  pool.Verdict
	}{
		{"tinyproxy's client refusal", tp, "403 Access denied", []string{"Server: tinyproxy/1.11.1"},
			pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopePair, Class: pool.ClassProxyDenied}},
		{"squid shutting down", sq.URL(), "503 Service Unavailable", []string{"Server: squid/5.7", "X-Squid-Error: ERR_SHUTTING_DOWN 0"},
			pool.Verdict{Outcome: pool.Transient, Scope: pool.ScopePair, Class: pool.ClassProxyError}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			forger := integForger(t, tt.line, tt.head...)
			tr, c := integNew(t, nil, pool.WithExits(integExit(t, tt.proxy, "x-1")), pool.WithClock(newIntegClock()))
			j := integJudge(t, c, forger.URL+"/forged", "")
			t.Logf("the origin's forged answer arrived as %s", j.answer())
			if !j.attempted || j.verdict != tt.want {
				t.Fatalf("GET /forged = verdict %+v (err %v), want %+v", j.verdict, j.err, tt.want)
			}
			integExitClean(t, tr, "x-1")
			if r := integMustGet(t, c, other.URL); r.exit != "x-1" {
				t.Errorf("GET %s went via %q, want x-1", other.URL, r.exit)
			}
		})
	}
}

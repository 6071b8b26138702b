package transport_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// The challenge fixtures live in testdata/challenges/VENDOR/NAME.http: a status line, header lines
// and, after a blank line, the body, as an edge would send them (LF line ends, no Content-Length).
// They are written for these tests, each with the markers its vendor documents (see the detectors'
// comments in softblock.go), not copied from vendors' pages. A fixture with
// "Transfer-Encoding: chunked" is sent without a length, as compressed and chunked pages arrive;
// any other is sent with its Content-Length.
const challengeDir = "testdata/challenges"

// challengeFx is one parsed fixture.
type challengeFx struct {
	name    string
	code    int
	reason  string
	header  http.Header // without Transfer-Encoding and Content-Length
	chunked bool
	body    []byte
}

// challengeFixture reads and parses the fixture name ("cloudflare/just-a-moment-200").
func challengeFixture(t *testing.T, name string) challengeFx {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(challengeDir, filepath.FromSlash(name)+".http"))
	if err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	head, body, ok := bytes.Cut(raw, []byte("\n\n"))
	if !ok {
		t.Fatalf("fixture %s: no blank line after the headers", name)
	}
	lines := strings.Split(string(head), "\n")
	proto, status, _ := strings.Cut(lines[0], " ")
	codeText, reason, _ := strings.Cut(status, " ")
	code, err := strconv.Atoi(codeText)
	if proto != "HTTP/1.1" || err != nil {
		t.Fatalf("fixture %s: status line %q, want HTTP/1.1 CODE REASON", name, lines[0])
	}
	fx := challengeFx{name: name, code: code, reason: reason, header: http.Header{}, body: body}
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, ": ")
		if !ok {
			t.Fatalf("fixture %s: header line %q", name, l)
		}
		switch http.CanonicalHeaderKey(k) {
		case "Transfer-Encoding":
			fx.chunked = v == "chunked"
		case "Content-Length":
			t.Fatalf("fixture %s: Content-Length is computed, leave it out", name)
		default:
			fx.header.Add(k, v)
		}
	}
	return fx
}

// wire returns the fixture as an HTTP/1.1 response on the wire: CRLF line ends, and the body chunked
// or with its Content-Length.
func (fx challengeFx) wire(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", fx.code, fx.reason)
	if err := fx.header.Write(&b); err != nil {
		t.Fatal(err)
	}
	if !fx.chunked {
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(fx.body))
		b.Write(fx.body)
		return b.Bytes()
	}
	b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
	cw := httputil.NewChunkedWriter(&b)
	for rest := fx.body; len(rest) > 0; { // 1000-byte chunks, as a streaming edge would send
		n := min(len(rest), 1000)
		cw.Write(rest[:n])
		rest = rest[n:]
	}
	cw.Close()
	b.WriteString("\r\n")
	return b.Bytes()
}

// response parses the fixture's wire form with net/http, as the base transport would receive it.
func (fx challengeFx) response(t *testing.T) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "http://shop.example.test/", nil)
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(fx.wire(t))), req)
	if err != nil {
		t.Fatalf("fixture %s: http.ReadResponse = %v", fx.name, err)
	}
	return resp
}

// serve writes the fixture as an origin's answer; a chunked fixture is flushed before its body, so
// net/http sends it without a length.
func (fx challengeFx) serve(w http.ResponseWriter) {
	for k, v := range fx.header {
		w.Header()[k] = v
	}
	w.WriteHeader(fx.code)
	if fx.chunked {
		w.(http.Flusher).Flush()
	}
	w.Write(fx.body)
}

// challengeCountingBody counts the bytes read through it.
type challengeCountingBody struct {
	io.ReadCloser
	n int
}

func (b *challengeCountingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += n
	return n, err
}

// challengeCases is every fixture and the verdict DefaultClassifier must give it. A negative case
// (a page that must stay a success) names no detector.
var challengeCases = []struct {
	name     string
	detector string        // "" for a negative case
	class    pool.Class    // for a negative case
	retry    time.Duration // Retry-After the verdict carries
	suspect  bool          // a plain 403: marked for the pool to judge (pool.Verdict.Suspect)
}{
	// Cloudflare.
	{name: "cloudflare/just-a-moment-200", detector: "cloudflare"}, // issue 12: no cf-mitigated, no length
	{name: "cloudflare/managed-challenge-403", detector: "cloudflare"},
	{name: "cloudflare/under-attack-503", detector: "cloudflare", retry: 8 * time.Second},
	{name: "cloudflare/access-denied-1020-403", detector: "cloudflare"},
	{name: "cloudflare/ordinary-200", class: pool.ClassOK},                     // cf-ray, __cf_bm, the jsd beacon
	{name: "cloudflare/origin-403", class: pool.ClassOrigin4xx, suspect: true}, // the origin's own 403 through Cloudflare
	// Imperva (Incapsula).
	{name: "imperva/incident-iframe-200", detector: "imperva"},
	{name: "imperva/blocked-403", detector: "imperva"},
	{name: "imperva/pardon-our-interruption-200", detector: "imperva"},
	{name: "imperva/ordinary-200", class: pool.ClassOK}, // X-Iinfo, incap cookies, injected script
	// Akamai.
	{name: "akamai/access-denied-403", detector: "akamai"},
	{name: "akamai/access-denied-200", detector: "akamai"},
	{name: "akamai/sec-cpt-200", detector: "akamai"},
	{name: "akamai/sec-cpt-428", detector: "akamai"},
	{name: "akamai/ordinary-200-bm-cookies", class: pool.ClassOK}, // _abck, bm_sz, ak_bmsc
	{name: "akamai/help-article-200", class: pool.ClassOK},        // quotes "Access Denied … Reference #"
	// AWS WAF.
	{name: "awswaf/challenge-202", detector: "awswaf"},
	{name: "awswaf/challenge-202-no-header", detector: "awswaf"},
	{name: "awswaf/challenge-202-empty", detector: "awswaf"}, // a request that did not accept text/html
	{name: "awswaf/captcha-405", detector: "awswaf"},
	{name: "awswaf/ordinary-200-integration", class: pool.ClassOK}, // loads challenge.js on a real page
	{name: "awswaf/ordinary-202-json", class: pool.ClassOK},
	// Kasada.
	{name: "kasada/blocked-429", detector: "kasada"},
	{name: "kasada/blocked-429-no-header", detector: "kasada"},
	{name: "kasada/ordinary-200-token", class: pool.ClassOK}, // x-kpsdk-ct on a success
	{name: "kasada/plain-429", class: pool.ClassRateLimited, retry: 30 * time.Second},
	// Captcha widgets.
	{name: "captcha/recaptcha-gate-200", detector: "captcha"},
	{name: "captcha/hcaptcha-gate-200", detector: "captcha"},
	{name: "captcha/turnstile-gate-403", detector: "captcha"},
	{name: "captcha/login-recaptcha-200", class: pool.ClassOK},
	{name: "captcha/contact-hcaptcha-200", class: pool.ClassOK},
	{name: "captcha/article-turnstile-200", class: pool.ClassOK},
	// DataDome and PerimeterX.
	{name: "datadome/captcha-403", detector: "datadome"},
	{name: "perimeterx/block-403", detector: "perimeterx"},
	{name: "perimeterx/ordinary-200-sensor", class: pool.ClassOK}, // the sensor every protected page loads
}

// TestChallengeFixtures runs every fixture through DefaultClassifier as net/http parses it, checks
// the verdict, that at most DefaultPeekLimit bytes were read before it, and that the caller still
// reads the body byte for byte. Negative fixtures are also shown to every detector whole (as if
// peeked), so they stay successes whatever makes the classifier peek.
func TestChallengeFixtures(t *testing.T) {
	now := time.Date(2026, 6, 2, 10, 0, 0, 0, time.UTC)
	for _, tc := range challengeCases {
		fx := challengeFixture(t, tc.name)
		resp := fx.response(t)
		cb := &challengeCountingBody{ReadCloser: resp.Body}
		resp.Body = cb
		a := &transport.Attempt{Request: resp.Request, Response: resp, Origin: "shop.example.test", Now: now}
		got := transport.DefaultClassifier.Classify(a)

		want := pool.Verdict{Outcome: pool.Success, Class: tc.class, RetryAfter: tc.retry, Suspect: tc.suspect}
		switch {
		case tc.detector != "":
			want = pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, Detector: tc.detector, RetryAfter: tc.retry}
		case tc.class == pool.ClassRateLimited:
			want.Outcome = pool.Transient
		}
		if got != want {
			t.Errorf("%s: DefaultClassifier.Classify(%d, length %d) = %+v, want %+v",
				tc.name, fx.code, resp.ContentLength, got, want)
		}
		if cb.n > transport.DefaultPeekLimit {
			t.Errorf("%s: Classify read %d bytes before its verdict, want at most %d", tc.name, cb.n, transport.DefaultPeekLimit)
		}
		body, err := io.ReadAll(a.Response.Body)
		if err != nil || !bytes.Equal(body, fx.body) {
			t.Errorf("%s: caller read %d bytes (err %v), want the fixture's %d bytes", tc.name, len(body), err, len(fx.body))
		}
		a.Response.Body.Close()

		if tc.detector != "" {
			continue
		}
		peek := fx.body[:min(len(fx.body), transport.DefaultPeekLimit)]
		s := &transport.Sample{Response: resp, Body: peek, Lower: bytes.ToLower(peek), Complete: len(peek) == len(fx.body)}
		for _, d := range transport.DefaultDetectors {
			if d.Detect(s) {
				t.Errorf("%s: %s.Detect(whole page) = true on a page that must stay a success", tc.name, d.Name())
			}
		}
	}
}

// TestChallengeFixturesAllListed: every fixture file has a case, and every case a file.
func TestChallengeFixturesAllListed(t *testing.T) {
	var files []string
	err := filepath.WalkDir(challengeDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(challengeDir, p)
		if err != nil {
			return err
		}
		if !strings.HasSuffix(rel, ".http") {
			return fmt.Errorf("%s: not a .http fixture", p)
		}
		files = append(files, strings.TrimSuffix(filepath.ToSlash(rel), ".http"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, tc := range challengeCases {
		if listed[tc.name] {
			t.Errorf("case %s listed twice", tc.name)
		}
		listed[tc.name] = true
	}
	sort.Strings(files)
	for _, f := range files {
		if !listed[f] {
			t.Errorf("fixture %s has no case in challengeCases", f)
		}
		delete(listed, f)
	}
	for name := range listed {
		t.Errorf("case %s has no fixture file", name)
	}
}

// TestIntegCloudflareChallengeAt200OpensPair is issue 12's crawl, through real proxies: origin A
// answers requests that come through proxy X with Cloudflare's "Just a moment..." page, status 200,
// Server: cloudflare, no cf-mitigated, sent without a length and with its challenge scripts past the
// 4 KiB peek (the fixture); through Y it serves an ordinary Cloudflare-fronted page. Every challenge
// is classed blocked by the cloudflare detector, the first opens the (X, A) pair (a block is
// decisive: breaker.Failure.Decisive), and A is then served through Y while X keeps serving origin B. The caller gets each
// challenge page whole. Over plain HTTP and, through CONNECT, HTTP/2 over TLS.
func TestIntegCloudflareChallengeAt200OpensPair(t *testing.T) {
	challenge := challengeFixture(t, "cloudflare/just-a-moment-200")
	ordinary := challengeFixture(t, "cloudflare/ordinary-200")
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			t.Parallel()
			reg := &proxytest.Registry{}
			var challenged atomic.Int64
			originA := integOrigin(t, h2, func(w http.ResponseWriter, r *http.Request, _ string) bool {
				if name, _ := reg.Lookup(r); name == "X" {
					challenged.Add(1)
					challenge.serve(w)
				} else {
					ordinary.serve(w)
				}
				return true
			})
			originB := integOrigin(t, false, nil)
			a := integOriginKey(originA)
			var exits []*pool.Exit
			for tier, name := range []string{"X", "Y"} {
				px, err := proxytest.Start(proxytest.Config{Name: name, Registry: reg})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { px.Close() })
				exits = append(exits, integExit(t, px.URL(), name).WithTier(tier))
			}
			obs := &integObserver{}
			tr, c := integNew(t, []*httptest.Server{originA}, pool.WithExits(exits...), pool.WithClock(newIntegClock()),
				transport.WithObserver(obs), pool.WithPairSettings(breaker.Settings{Rand: integHalf}))

			// X is in tier 0: A is fetched through it until the pair opens.
			const challenges = 1 // a block trips the pair at once, whatever the FailureThreshold
			for i := range challenges {
				r := integGet(c, originA.URL)
				if r.err != nil || r.status != http.StatusOK || r.exit != "X" || r.body != string(challenge.body) {
					t.Fatalf("step %d: Get(A) = %d via %q, %d bytes, err %v; want 200 via X, the challenge's %d bytes",
						i, r.status, r.exit, len(r.body), r.err, len(challenge.body))
				}
				want := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, Detector: "cloudflare"}
				if v := obs.last(t).Verdict; v != want {
					t.Fatalf("step %d: verdict = %+v, want %+v", i, v, want)
				}
			}
			xa, _ := integPairState(tr.Pool().Snapshot(), "X", a)
			if xa.State != breaker.Open || xa.LastFailure != string(pool.ClassBlocked) {
				t.Fatalf("pair (X, A) after %d challenges = %v, last failure %q; want open, %s",
					challenges, xa.State, xa.LastFailure, pool.ClassBlocked)
			}

			// The pair is open: A is served through Y, and X still serves B.
			for i := range 3 {
				r := integMustGet(t, c, originA.URL)
				if r.exit != "Y" || r.body != string(ordinary.body) {
					t.Errorf("step %d: Get(A) via %s, %d bytes; want via Y, the ordinary page", i, r.exit, len(r.body))
				}
				if v := obs.last(t).Verdict; v != (pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}) {
					t.Errorf("step %d: verdict of the ordinary page = %+v, want success ok", i, v)
				}
				if r := integMustGet(t, c, originB.URL); r.exit != "X" {
					t.Errorf("step %d: Get(B) via %s, want via X: a challenge is the pair's business", i, r.exit)
				}
			}
			if got := challenged.Load(); got != challenges {
				t.Errorf("origin A challenged %d requests, want %d: an open pair sends nothing", got, challenges)
			}
			for _, e := range tr.Pool().Snapshot().Exits {
				if e.Breaker.State != breaker.Closed {
					t.Errorf("exit %s = %v, want closed: a challenge judges the pair, not the exit", e.Exit, e.Breaker.State)
				}
			}
		})
	}
}

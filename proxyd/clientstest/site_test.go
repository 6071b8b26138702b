package clientstest

import (
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// ban is how a site turns away an exit it has banned.
type ban int

const (
	noBan     ban = iota
	plain403      // a bare 403 page, as a WAF's IP rule answers
	challenge     // Cloudflare's "Just a moment..." interstitial, 403 with cf-mitigated: challenge
	captcha       // a 200 page whose body is a CAPTCHA, which only a client reading the page can tell
	tooMany       // 429 with Retry-After: 600
)

// challengePage is Cloudflare's managed-challenge interstitial, as transport's detector knows it.
const challengePage = `<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title></head><body>` +
	`<noscript>Enable JavaScript and cookies to continue</noscript>` +
	`<script src="/cdn-cgi/challenge-platform/h/g/orchestrate/chl_page/v1"></script></body></html>`

// CaptchaMarker is the text of the CAPTCHA page the Scrapy middleware looks for.
const captchaMarker = "Please solve the CAPTCHA to continue"

// site is an origin on 127.0.0.1 with a small page set: "/" links to /p/0 … /p/N-1. It records
// the source address of every request — the exit the request came through — and answers the
// sources it bans as a site would.
type site struct {
	srv    *httptest.Server
	pages  int
	mu     sync.Mutex
	bans   map[string]ban
	order  []string // the source address of each page request, in arrival order
	caFile string   // the PEM of the HTTPS site's certificate, for clients that take a CA file
}

// newSite starts a site with pages pages, over TLS when secure.
func newSite(t *testing.T, secure bool, pages int) *site {
	t.Helper()
	s := &site{pages: pages, bans: map[string]ban{}}
	if secure {
		s.srv = httptest.NewTLSServer(s)
		s.caFile = filepath.Join(t.TempDir(), "ca.pem")
		pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
		if err := os.WriteFile(s.caFile, pemBytes, 0o600); err != nil {
			t.Fatal(err)
		}
	} else {
		s.srv = httptest.NewServer(s)
	}
	t.Cleanup(s.srv.Close)
	return s
}

// URL returns the site's base URL, http(s)://127.0.0.1:PORT.
func (s *site) URL() string { return s.srv.URL }

// banSource makes the site answer requests from source with b.
func (s *site) banSource(source string, b ban) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bans[source] = b
}

// ServeHTTP serves the page set; /favicon.ico is 404 and not counted.
func (s *site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/favicon.ico" {
		http.NotFound(w, r)
		return
	}
	src, _, _ := net.SplitHostPort(r.RemoteAddr)
	s.mu.Lock()
	s.order = append(s.order, src)
	b := s.bans[src]
	s.mu.Unlock()
	h := w.Header()
	switch b {
	case plain403:
		h.Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, "<html><head><title>403 Forbidden</title></head><body><h1>Forbidden</h1></body></html>")
		return
	case challenge:
		h.Set("Content-Type", "text/html; charset=UTF-8")
		h.Set("Server", "cloudflare")
		h.Set("Cf-Mitigated", "challenge")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, challengePage)
		return
	case captcha:
		h.Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<html><head><title>Verify</title></head><body><p>%s</p></body></html>", captchaMarker)
		return
	case tooMany:
		h.Set("Retry-After", "600")
		h.Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, "slow down")
		return
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	var page strings.Builder
	title := "home"
	if p, ok := strings.CutPrefix(r.URL.Path, "/p/"); ok {
		title = "page " + p
	}
	fmt.Fprintf(&page, "<!DOCTYPE html><html><head><title>%s</title></head><body><h1>%s</h1><ul>", title, title)
	for i := range s.pages {
		fmt.Fprintf(&page, `<li><a href="/p/%d">page %d</a></li>`, i, i)
	}
	page.WriteString("</ul></body></html>")
	fmt.Fprint(w, page.String())
}

// count returns how many page requests came from source.
func (s *site) count(source string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, src := range s.order {
		if src == source {
			n++
		}
	}
	return n
}

// total returns how many page requests the site saw.
func (s *site) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.order)
}

// tail returns the sources of the last n page requests (fewer when the site saw fewer).
func (s *site) tail(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.order[max(0, len(s.order)-n):]...)
}

// sources returns the count of page requests by source, for failure messages.
func (s *site) sources() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]int{}
	for _, src := range s.order {
		m[src]++
	}
	return m
}

// checkRoutedAround is the key assertion of every client test: banned saw the banned source at
// most maxBanned times and not at all in its last tailLen requests, while other, which bans
// nobody, still saw that source — the ban was routed around for the one site only. The counts
// are the sites', never the daemon's.
func checkRoutedAround(t *testing.T, banned, other *site, source string, maxBanned, tailLen int) {
	t.Helper()
	t.Logf("by source: the banning site %v, the other %v", banned.sources(), other.sources())
	if n := banned.count(source); n < 1 || n > maxBanned {
		t.Errorf("the banning site saw %s %d times, want 1 to %d (by source: %v)", source, n, maxBanned, banned.sources())
	}
	for _, src := range banned.tail(tailLen) {
		if src == source {
			t.Errorf("the banning site's last %d requests %v include %s: not routed around", tailLen, banned.tail(tailLen), source)
			break
		}
	}
	if banned.total() < tailLen+1 {
		t.Errorf("the banning site saw %d requests, want more than %d", banned.total(), tailLen)
	}
	if n := other.count(source); n == 0 {
		t.Errorf("the other site never saw %s: the ban was not for one site only (by source: %v)", source, other.sources())
	}
}

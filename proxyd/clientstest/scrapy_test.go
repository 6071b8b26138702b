package clientstest

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/servertest"
)

// crawlScript is the Scrapy example the test runs: the spider and its report middleware.
var crawlScript = filepath.Join("..", "..", "examples", "scrapy", "crawl.py")

// crawled is one line of the example's output: a page, or the summary at the end.
type crawled struct {
	URL     string `json:"url"`
	Status  int    `json:"status"`
	Captcha bool   `json:"captcha"`
	Summary *struct {
		Reason    string `json:"reason"`
		Reported  int    `json:"reported"`
		Retries   int    `json:"retries"`
		Responses int    `json:"responses"`
	} `json:"summary"`
}

// TestScrapyMiddlewareReportsCaptchaInsideHTTPS: Scrapy (Debian's) crawls three sites through the
// daemon with examples/scrapy's middleware, every request with a session of its own in the proxy
// username. The first HTTPS site serves exit a a CAPTCHA page — inside TLS, where the daemon sees
// only bytes — which the middleware reports by the session it used; the daemon maps the session to
// exit a, opens the pair, and the site's later pages come through other exits. The plain-HTTP site
// answers exit b Cloudflare's challenge, which the daemon judges itself (the middleware sees its
// verdict in Proxy-Status and only retries). A third HTTPS site answers exit d 429 with
// Retry-After, reported as rate_limited by session. The clean HTTPS site bans nobody and keeps
// seeing every exit. Every count is the sites'.
func TestScrapyMiddlewareReportsCaptchaInsideHTTPS(t *testing.T) {
	py := servertest.PythonModules(t, "scrapy")
	captchaSite, clean, chal := newSite(t, true, 14), newSite(t, true, 14), newSite(t, false, 14)
	limited := newSite(t, true, 14)
	captchaSite.banSource(srcA, captcha)
	chal.banSource(srcB, challenge)
	limited.banSource(srcD, tooMany)
	w := newWorld(t, worldConfig{})
	admin := w.admin()
	cmd := exec.Command(py, crawlScript, "--proxy", "http://"+w.addr, "--admin", admin,
		captchaSite.URL()+"/", clean.URL()+"/", chal.URL()+"/", limited.URL()+"/")
	cmd.Env = append(cmd.Environ(), "PYTHONDONTWRITEBYTECODE=1", "http_proxy=", "https_proxy=", "HTTP_PROXY=", "HTTPS_PROXY=", "no_proxy=", "NO_PROXY=")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scrapy crawl: %v\n%s", err, tailOf(stderr.String(), 4000))
	}
	pages := map[string]crawled{}
	var sum *crawled
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var c crawled
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("scrapy output line %q: %v", line, err)
		}
		if c.Summary != nil {
			sum = &c
			continue
		}
		pages[c.URL] = c
	}
	if sum == nil || sum.Summary.Reported < 2 {
		t.Fatalf("scrapy summary %+v, want at least two reports (the CAPTCHA, the 429)\n%s", sum, tailOf(stderr.String(), 4000))
	}
	// Every page of every site was crawled (15 each: the start page and 14 links), and none of
	// the pages kept in the end is the CAPTCHA or the challenge.
	for _, s := range []*site{captchaSite, clean, chal, limited} {
		n := 0
		for u, c := range pages {
			if strings.HasPrefix(u, s.URL()) {
				n++
				if c.Status != 200 || c.Captcha {
					t.Errorf("%s: status %d captcha %v, want a 200 page", u, c.Status, c.Captcha)
				}
			}
		}
		if n != 15 {
			t.Errorf("scrapy crawled %d pages of %s, want 15", n, s.URL())
		}
	}
	// At concurrency 2, at most two pages can be in flight through exit a when the first CAPTCHA
	// comes back, and their retries keep their sessions, now moved off a.
	checkRoutedAround(t, captchaSite, clean, srcA, 3, 10)
	checkRoutedAround(t, chal, clean, srcB, 8, 8)
	checkRoutedAround(t, limited, clean, srcD, 3, 10)
	t.Logf("summary %+v", *sum.Summary)
	if t.Failed() {
		t.Logf("scrapy log:\n%s", tailOf(stderr.String(), 6000))
	}
}

// tailOf returns the last n bytes of s.
func tailOf(s string, n int) string { return s[max(0, len(s)-n):] }

// TestScrapyMiddlewareUnit runs the middleware's own unit tests (examples/scrapy/
// test_proxybreaker_scrapy.py: Proxy-Status parsing, the username without its password, the
// verdicts) with Debian's python3 and Scrapy.
func TestScrapyMiddlewareUnit(t *testing.T) {
	py := servertest.PythonModules(t, "scrapy")
	cmd := exec.Command(py, "-m", "unittest", "-v", "test_proxybreaker_scrapy")
	cmd.Dir = filepath.Dir(crawlScript)
	cmd.Env = append(cmd.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Ran 7 tests") {
		t.Errorf("python3 -m unittest ran other than the 7 tests:\n%s", out)
	}
}

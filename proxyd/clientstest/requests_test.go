package clientstest

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/servertest"
)

// fetchScript fetches each URL on its command line, in order, with one requests.Session through
// the proxy in $PROXY (for http and https, trusting the CA file in $CA), and prints one line per
// URL: the status, and the daemon's Proxy-Status when the response carries one.
const fetchScript = `
import os, sys, requests
s = requests.Session()
s.proxies = {"http": os.environ["PROXY"], "https": os.environ["PROXY"]}
ca = os.environ.get("CA") or True
for u in sys.argv[1:]:
    try:
        # verify per request: requests lets REQUESTS_CA_BUNDLE override a Session's verify.
        r = s.get(u, timeout=20, verify=ca)
        print(r.status_code, r.headers.get("Proxy-Status", "-"))
    except requests.RequestException as e:
        print(0, type(e).__name__)
`

// pyFetch runs fetchScript with Debian's python3 and returns its lines.
func pyFetch(t *testing.T, py, proxy, ca string, urls ...string) []string {
	t.Helper()
	cmd := exec.Command(py, append([]string{"-c", fetchScript}, urls...)...)
	cmd.Env = append(cmd.Environ(), "PROXY="+proxy, "CA="+ca, "NO_PROXY=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 requests: %v\n%s", err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestRequestsRoutesAround429AndChallenge: Python requests, one kept-alive session through the
// daemon, fetches two plain-HTTP sites in turn. The first answers exit a 429 with Retry-After; the
// second answers exit b Cloudflare's challenge page. Each site stops seeing the exit it bans while
// it still sees the one the other bans; the 429 needs one answer to open its pair. Then an HTTPS
// page through a CONNECT tunnel, with a session username, comes back 200.
func TestRequestsRoutesAround429AndChallenge(t *testing.T) {
	py := servertest.PythonModules(t, "requests")
	s429, sChal := newSite(t, false, 4), newSite(t, false, 4)
	s429.banSource(srcA, tooMany)
	sChal.banSource(srcB, challenge)
	w := newWorld(t, worldConfig{})
	var urls []string
	const n = 30
	for i := range n {
		urls = append(urls, fmt.Sprintf("%s/p/%d", s429.URL(), i%4), fmt.Sprintf("%s/p/%d", sChal.URL(), i%4))
	}
	lines := pyFetch(t, py, w.proxyURL("http", ""), "", urls...)
	if len(lines) != 2*n {
		t.Fatalf("requests printed %d lines, want %d:\n%s", len(lines), 2*n, strings.Join(lines, "\n"))
	}
	for i, l := range lines {
		if !strings.Contains(l, "proxybreakerd; next-hop=") {
			t.Errorf("response %d: %q, want the daemon's Proxy-Status naming the exit", i, l)
			break
		}
	}
	checkRoutedAround(t, s429, sChal, srcA, 1, 20)
	checkRoutedAround(t, sChal, s429, srcB, 6, 15)

	secure := newSite(t, true, 2)
	lines = pyFetch(t, py, w.proxyURL("http", "acct-session-py1"), secure.caFile, secure.URL()+"/p/0", secure.URL()+"/p/1")
	for i, l := range lines {
		if !strings.HasPrefix(l, "200 ") {
			t.Errorf("https page %d: %q, want 200", i, l)
		}
	}
	if got := secure.total(); got != 2 {
		t.Errorf("the HTTPS site saw %d requests, want 2", got)
	}
	src := secure.tail(2)
	if len(src) == 2 && src[0] != src[1] {
		t.Errorf("the HTTPS pages of one session came from %v, want one exit (a kept-alive tunnel, a sticky session)", src)
	}
}

package clientstest

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/servertest"
)

// curl runs curl once with args and returns the HTTP status it got (0 when it got none) and its
// exit code. Every run has a deadline of its own; none follows a redirect.
func curl(t *testing.T, bin string, args ...string) (status, exit int) {
	t.Helper()
	args = append([]string{"-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "20", "--noproxy", ""}, args...)
	out, err := exec.Command(bin, args...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		exit = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("curl %v: %v", args, err)
	}
	status, _ = strconv.Atoi(strings.TrimSpace(string(out)))
	return status, exit
}

// TestCurlPlainHTTP403RoutedAround: curl -x through the daemon to two plain-HTTP sites, one of
// which answers exit a with a bare 403. The banning site stops seeing a's address after a few
// requests and every later one is served by another exit, while the other site keeps seeing a.
func TestCurlPlainHTTP403RoutedAround(t *testing.T) {
	bin := servertest.ClientBinary(t, "curl", "/usr/bin/curl")
	banned, other := newSite(t, false, 3), newSite(t, false, 3)
	banned.banSource(srcA, plain403)
	w := newWorld(t, worldConfig{})
	const n = 30
	okBanned := 0
	for i := range n {
		if code, _ := curl(t, bin, "-x", w.proxyURL("http", ""), fmt.Sprintf("%s/p/%d", banned.URL(), i%3)); code == 200 {
			okBanned++
		}
		if code, ex := curl(t, bin, "-x", w.proxyURL("http", ""), fmt.Sprintf("%s/p/%d", other.URL(), i%3)); code != 200 {
			t.Fatalf("curl other site #%d = %d (exit %d), want 200", i, code, ex)
		}
	}
	checkRoutedAround(t, banned, other, srcA, 6, 15)
	if okBanned < n-6 {
		t.Errorf("curl got 200 from the banning site %d times of %d, want at least %d", okBanned, n, n-6)
	}
}

// TestCurlRefusedConnectRoutedAround: curl to two HTTPS sites through CONNECT (-x, with the test
// CA) and through SOCKS5 (--socks5-hostname, the daemon resolving "localhost"). A real tinyproxy
// exit refuses CONNECT to the first site's port (403) and carries the second: the daemon reads the
// refusal in the CONNECT reply, parks that pair only, and the first site is reached through the
// other exits while the second keeps seeing tinyproxy's address.
func TestCurlRefusedConnectRoutedAround(t *testing.T) {
	bin := servertest.ClientBinary(t, "curl", "/usr/bin/curl")
	banned, other := newSite(t, true, 3), newSite(t, true, 3)
	w := newWorld(t, worldConfig{tinyproxy: true, connectPorts: []int{portOf(t, other.URL())}})
	for _, via := range []struct {
		name string
		args func(u string) []string
		host func(u string) string
	}{
		{"connect", func(u string) []string { return []string{"-x", w.proxyURL("http", "")} }, func(u string) string { return u }},
		{"socks5h", func(u string) []string { return []string{"--socks5-hostname", w.addr} },
			func(u string) string { return strings.Replace(u, "127.0.0.1", "localhost", 1) }},
	} {
		failed := 0
		const n = 20
		for i := range n {
			for _, s := range []*site{banned, other} {
				args := append(via.args(s.URL()), "--cacert", s.caFile, fmt.Sprintf("%s/p/%d", via.host(s.URL()), i%3))
				if via.name == "socks5h" {
					// The test certificate names 127.0.0.1 and example.com, not localhost.
					args = append(args, "--resolve", "localhost:"+strconv.Itoa(portOf(t, s.URL()))+":127.0.0.1", "-k")
				}
				code, ex := curl(t, bin, args...)
				switch {
				case code == 200:
				case s == banned:
					failed++
				default:
					t.Fatalf("%s: curl other site #%d = %d (exit %d), want 200", via.name, i, code, ex)
				}
			}
		}
		// Each refused CONNECT fails the one request that met it; the pair is parked by the
		// first (the refusal is a permanent pair verdict), and a second may be in the same
		// instant's race only with a concurrent client, which curl in a loop is not.
		if failed > 1 {
			t.Errorf("%s: %d requests to the banning site failed, want at most 1", via.name, failed)
		}
	}
	if n := banned.count(srcTP); n != 0 {
		t.Errorf("the banning site saw tinyproxy's address %d times, want 0 (it refuses CONNECT there)", n)
	}
	if n := other.count(srcTP); n == 0 {
		t.Errorf("the other site never saw tinyproxy's address: the refusal parked more than the pair (by source: %v)", other.sources())
	}
	if got := banned.total(); got < 2*20-2 {
		t.Errorf("the banning site served %d requests, want at least %d", got, 2*20-2)
	}
}

// TestCurl407ParksTheExitEverywhere: exit c's proxy answers 407 (the list has its password wrong).
// curl through the daemon to two sites: c's proxy turns the daemon away once, the exit is parked
// for every site, and neither site ever sees c's address.
func TestCurl407ParksTheExitEverywhere(t *testing.T) {
	bin := servertest.ClientBinary(t, "curl", "/usr/bin/curl")
	s1, s2 := newSite(t, false, 2), newSite(t, true, 2)
	w := newWorld(t, worldConfig{badAuth: true})
	const n = 15
	failed := 0
	for i := range n {
		for _, s := range []*site{s1, s2} {
			args := []string{"-x", w.proxyURL("http", ""), fmt.Sprintf("%s/p/%d", s.URL(), i%2)}
			if s.caFile != "" {
				args = append(args, "--cacert", s.caFile)
			}
			if code, _ := curl(t, bin, args...); code != 200 {
				failed++
			}
		}
	}
	if got := w.proxies["c"].Rejected(); got != 1 {
		t.Errorf("exit c's proxy turned the daemon away %d times, want 1: a 407 parks the exit for every site", got)
	}
	if failed > 1 {
		t.Errorf("%d requests failed, want at most the one that met the 407", failed)
	}
	for i, s := range []*site{s1, s2} {
		if c := s.count(srcC); c != 0 {
			t.Errorf("site %d saw exit c's address %d times, want 0", i+1, c)
		}
		if s.total() < n-1 {
			t.Errorf("site %d served %d requests, want at least %d", i+1, s.total(), n-1)
		}
	}
}

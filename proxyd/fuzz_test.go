package proxyd

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/pool"
)

// FuzzSOCKSHandshake feeds arbitrary bytes to the SOCKS5 server's parsers in the order a client
// sends them: nothing panics, and a request that parses names a host and a port.
func FuzzSOCKSHandshake(f *testing.F) {
	f.Add([]byte{5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, 0, 80})
	f.Add([]byte{5, 1, 2, 1, 3, 'u', '-', 'x', 1, 'p', 5, 1, 0, 3, 9, 'l', 'o', 'c', 'a', 'l', 'h', 'o', 's', 't', 1, 187})
	f.Add([]byte{5, 1, 0, 5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 187})
	f.Add([]byte{5, 0})
	f.Add([]byte{5, 1, 0, 5, 1, 0, 3, 0, 0, 80})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		methods, err := readSOCKSGreeting(r)
		if err != nil {
			return
		}
		if len(methods) == 0 {
			t.Fatal("a greeting with no methods parsed")
		}
		if bytes.Contains(methods, []byte{socksUserPass}) {
			if _, _, err := readSOCKSUserPass(r); err != nil {
				return
			}
		}
		req, err := readSOCKSRequest(r)
		if err != nil {
			return
		}
		host, port, err := net.SplitHostPort(req.target)
		if err != nil || host == "" || port == "0" || host != req.host {
			t.Fatalf("request target %q (host %q): %v", req.target, req.host, err)
		}
	})
}

// FuzzParseOptions: no options text panics the parser, and what parses has a Want that pool reads
// back as itself.
func FuzzParseOptions(f *testing.F) {
	for _, s := range []string{"session-abc-country-us", "tier-1-exit-dc-1", "country-us,ca", "-", "session--x", "a-b-c-d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseOptions(s)
		if err != nil {
			return
		}
		if w, err := pool.ParseWant(o.Want.String()); err != nil || w != o.Want {
			t.Fatalf("ParseOptions(%q).Want = %q, which ParseWant reads as %v, %v", s, o.Want, w, err)
		}
	})
}

// FuzzRequestHead sends arbitrary request heads to a listener that demands credentials, over a
// pool with no exits and no private targets: whatever arrives, the answer is an error status (no
// request can go anywhere), nothing panics, and no answer shows the password.
func FuzzRequestHead(f *testing.F) {
	auth := "Proxy-Authorization: Basic " + basic("alice-session-x", "pw-secret") + "\r\n"
	for _, s := range []string{
		"GET http://shop.example/ HTTP/1.1\r\nHost: shop.example\r\n" + auth + "\r\n",
		"CONNECT shop.example:443 HTTP/1.1\r\nHost: shop.example:443\r\n" + auth + "\r\n",
		"CONNECT 169.254.169.254:80 HTTP/1.1\r\n" + auth + "\r\n",
		"GET http://10.0.0.1/ HTTP/1.1\r\n" + auth + "X-Proxybreaker-Options: country-us\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"CONNECT [::1]:443 HTTP/1.1\r\n\r\n",
	} {
		f.Add(s)
	}
	p, err := pool.New()
	if err != nil {
		f.Fatal(err)
	}
	s, err := New(p, Config{Credentials: []Credential{{"alice", "pw-secret"}}})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	l := &listener{s: s}
	f.Fuzz(func(t *testing.T, head string) {
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		l.ServeHTTP(rec, req)
		if rec.Code < 400 {
			t.Fatalf("%q answered %d, want an error status", head, rec.Code)
		}
		out := rec.Body.String() + strings.Join(rec.Header().Values("Proxy-Status"), " ")
		if strings.Contains(out, "pw-secret") {
			t.Fatalf("%q: the answer shows the password: %s", head, out)
		}
	})
}

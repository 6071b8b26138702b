package testkit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

func TestExits(t *testing.T) {
	const n = 62_502 // past the first block of addresses
	exits := testkit.Exits("e", n)
	hosts := map[string]bool{}
	for i, e := range exits {
		u := e.ProxyURL()
		if hosts[u.Host] {
			t.Fatalf("exit %d: address %s given twice", i, u.Host)
		}
		hosts[u.Host] = true
		if i%10_000 != 0 && i < n-2 {
			continue
		}
		if want := fmt.Sprintf("e%d", i); e.Label() != want {
			t.Errorf("exit %d: Label() = %q, want %q", i, e.Label(), want)
		}
		if pw, _ := u.User.Password(); u.User.Username() != fmt.Sprintf("user%d", i) || pw != fmt.Sprintf("pw-%d", i) {
			t.Errorf("exit %d: credentials %s, want user%d:pw-%d", i, u.User.Username(), i, i)
		}
		if !strings.HasPrefix(u.Host, "10.") || !strings.HasSuffix(u.Host, ":3128") {
			t.Errorf("exit %d: address %s, want 10.x.y.z:3128", i, u.Host)
		}
	}
}

// tlsOrigin answers 200 "hello via NAME" over TLS, NAME the proxy reg says carried the request.
func tlsOrigin(t *testing.T, reg *proxytest.Registry) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		via := "direct"
		if reg != nil {
			via, _ = reg.Lookup(r)
		}
		fmt.Fprintf(w, "hello via %s", via)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusting clients' handshake failures
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// TLSTemplate trusts the TLS servers it is given, and no other certificate.
func TestTLSTemplate(t *testing.T) {
	srv := tlsOrigin(t, nil)
	plain := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(plain.Close)
	for _, tc := range []struct {
		name    string
		servers []*httptest.Server
		trusted bool
	}{
		{"trusted", []*httptest.Server{plain, nil, srv}, true},
		{"none", nil, false},
		{"plain_only", []*httptest.Server{plain}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := testkit.TLSTemplate(tc.servers...)
			defer tmpl.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tmpl, Timeout: 10 * time.Second}).Get(srv.URL)
			if err == nil {
				resp.Body.Close()
			}
			if (err == nil) != tc.trusted {
				t.Errorf("GET %s with TLSTemplate(%s servers) = %v; want trusted %v", srv.URL, tc.name, err, tc.trusted)
			}
			if tmpl.MaxResponseHeaderBytes != transport.DefaultMaxResponseHeaderBytes {
				t.Errorf("MaxResponseHeaderBytes = %d, want DefaultBaseTemplate's %d", tmpl.MaxResponseHeaderBytes, transport.DefaultMaxResponseHeaderBytes)
			}
		})
	}
}

// A World's exits fail each in its own way, through real proxies, and a healthy one reaches a TLS
// origin through its tunnel on the world's transport.
func TestWorld(t *testing.T) {
	reg := &proxytest.Registry{}
	origin := tlsOrigin(t, reg)
	w := testkit.StartWorld(t, reg,
		testkit.ExitSpec{Name: "ok"},
		testkit.ExitSpec{Name: "authed", User: "alice"},
		testkit.ExitSpec{Name: "auth", User: "bob", WrongPass: true},
		testkit.ExitSpec{Name: "dead", Dead: true},
		testkit.ExitSpec{Name: "hang", Hang: true},
	)
	if len(w.Exits) != 5 || len(w.Proxies) != 4 || w.Proxies["dead"] != nil {
		t.Fatalf("StartWorld: %d exits, %d proxies (dead: %v); want 5, 4, none for dead", len(w.Exits), len(w.Proxies), w.Proxies["dead"])
	}
	tr := w.Transport(t, origin, []pool.Option{pool.WithoutTiers()}, transport.WithHeaderTimeout(time.Second))
	for _, tc := range []struct {
		exit  string
		class pool.Class // "" for a 200 from the origin
	}{
		{"ok", ""},
		{"authed", ""},
		{"auth", pool.ClassProxyAuth},
		{"dead", pool.ClassProxyRefused},
		{"hang", pool.ClassTimeout},
	} {
		status, _, body, err := through(tr, context.Background(), tc.exit, origin.URL+"/")
		if tc.class == "" {
			if err != nil || status != 200 || body != "hello via "+tc.exit {
				t.Errorf("GET via %s = %d %q, %v; want 200 \"hello via %s\"", tc.exit, status, body, err, tc.exit)
			}
			continue
		}
		var ae *transport.AttemptError
		if !errors.As(err, &ae) || ae.Exit != tc.exit || ae.Verdict.Class != tc.class {
			t.Errorf("GET via %s = %d, %v; want an AttemptError of class %s", tc.exit, status, err, tc.class)
		}
	}
	if n := w.Proxies["auth"].Rejected(); n == 0 {
		t.Errorf("proxy auth rejected nothing; the exit should dial it with a wrong password")
	}
	for _, e := range w.Exits {
		if strings.Contains(e.Label(), "right") || strings.Contains(e.String(), "wrong") {
			t.Errorf("exit %s shows a password", e.Label())
		}
	}
}

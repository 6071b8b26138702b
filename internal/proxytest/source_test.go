package proxytest_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
)

// TestSourceAddr: a proxy with a SourceAddr reaches origins from that address — plain HTTP,
// CONNECT tunnels and SOCKS5 alike — so an origin on 127.0.0.1 tells its clients apart by IP,
// while a proxy without one (and a client with none) arrives from 127.0.0.1.
func TestSourceAddr(t *testing.T) {
	t.Parallel()
	who := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip, _, _ := net.SplitHostPort(r.RemoteAddr)
		w.Write([]byte(ip))
	})
	plain := httptest.NewServer(who)
	t.Cleanup(plain.Close)
	secure := httptest.NewUnstartedServer(who)
	secure.EnableHTTP2 = true
	secure.StartTLS()
	t.Cleanup(secure.Close)

	bound := startProxy(t, proxytest.Config{Name: "bound", SourceAddr: "127.0.0.2"})
	other := startProxy(t, proxytest.Config{Name: "other", SourceAddr: "127.0.0.3"})
	unbound := startProxy(t, proxytest.Config{Name: "unbound"})
	socks := startProxy(t, proxytest.Config{Name: "socks", SOCKS5: true, SourceAddr: "127.0.0.4"})

	for i, tt := range []struct {
		name   string
		client *http.Client
		url    string
		want   string
	}{
		{"plain via bound", newClient(t, bound.URL(), nil, nil), plain.URL, "127.0.0.2"},
		{"CONNECT via bound", newClient(t, bound.URL(), secure, nil), secure.URL, "127.0.0.2"},
		{"CONNECT via other", newClient(t, other.URL(), secure, nil), secure.URL, "127.0.0.3"},
		{"plain via unbound", newClient(t, unbound.URL(), nil, nil), plain.URL, "127.0.0.1"},
		{"SOCKS5 via socks", socksClient(t, socks, "", "", secure), secure.URL, "127.0.0.4"},
		{"no proxy", plain.Client(), plain.URL, "127.0.0.1"},
	} {
		if _, body := get(t, tt.client, tt.url); body != tt.want {
			t.Errorf("step %d (%s): origin saw the client at %q, want %q", i, tt.name, body, tt.want)
		}
	}
}

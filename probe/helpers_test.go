package probe_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// startProxy starts an in-process proxy, closed when the test ends.
func startProxy(t testing.TB, cfg proxytest.Config) *proxytest.Proxy {
	t.Helper()
	p, err := proxytest.Start(cfg)
	if err != nil {
		t.Fatalf("proxytest.Start(%s) = %v", cfg.Name, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// behaviour is how the test origin answers a request carried by a given proxy.
type behaviour func(w http.ResponseWriter, r *http.Request) bool

// startOrigin starts an httptest origin (TLS when secure) that answers by the behaviour registered
// for the proxy that carried the request (reg.Lookup), and 200 "ok" otherwise.
func startOrigin(t testing.TB, secure bool, reg *proxytest.Registry, by map[string]behaviour) *httptest.Server {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reg != nil {
			if name, ok := reg.Lookup(r); ok {
				if b := by[name]; b != nil && b(w, r) {
					return
				}
			}
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "ok")
	})
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes cut by the probes' timeouts
	if secure {
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{ecdsaCert(t)}}
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// ecdsaCert is a self-signed P-256 certificate for 127.0.0.1: cheaper handshakes than httptest's
// RSA 2048 certificate, which matters with hundreds of handshakes at once under the race detector.
func ecdsaCert(t testing.TB) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "probe test origin"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// slowLoris answers 200 with a declared body it sends a byte at a time, every 50 ms, until the
// client goes away: a body no probe can finish.
func slowLoris(w http.ResponseWriter, r *http.Request) bool {
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", "100000")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()
	for range 100000 {
		select {
		case <-r.Context().Done():
			return true
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := w.Write([]byte("x")); err != nil {
			return true
		}
		if rc.Flush() != nil {
			return true
		}
	}
	return true
}

// throttle answers 429 with Retry-After: seconds.
func throttle(seconds int) behaviour {
	return func(w http.ResponseWriter, _ *http.Request) bool {
		w.Header().Set("Retry-After", fmt.Sprint(seconds))
		w.WriteHeader(http.StatusTooManyRequests)
		return true
	}
}

// challenge answers a Cloudflare challenge page.
func challenge(w http.ResponseWriter, _ *http.Request) bool {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cf-Mitigated", "challenge")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprint(w, "<html><head><title>Just a moment...</title></head><body>checking</body></html>")
	return true
}

// status answers code with an empty body.
func status(code int) behaviour {
	return func(w http.ResponseWriter, _ *http.Request) bool {
		w.WriteHeader(code)
		return true
	}
}

// template is DefaultBaseTemplate trusting the TLS origins among servers.
func template(servers ...*httptest.Server) *http.Transport {
	roots := x509.NewCertPool()
	for _, s := range servers {
		if c := s.Certificate(); c != nil {
			roots.AddCert(c)
		}
	}
	tmpl := transport.DefaultBaseTemplate()
	tmpl.TLSClientConfig = &tls.Config{RootCAs: roots}
	return tmpl
}

// exitVia is an exit dialing u, labelled label.
func exitVia(t testing.TB, u *url.URL, label string) *pool.Exit {
	t.Helper()
	e, err := pool.NewExit(u)
	if err != nil {
		t.Fatalf("NewExit = %v", err)
	}
	return e.WithLabel(label)
}

// withPass is u with user and pass.
func withPass(u *url.URL, user, pass string) *url.URL {
	c := *u
	c.User = url.UserPassword(user, pass)
	return &c
}

// closedProxy is the URL of a proxy that refuses connections.
func closedProxy(t testing.TB) *url.URL {
	t.Helper()
	addr, err := proxytest.ClosedAddr()
	if err != nil {
		t.Fatal(err)
	}
	return &url.URL{Scheme: "http", Host: addr}
}

func mustURL(t testing.TB, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

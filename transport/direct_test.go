package transport

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
)

// TestDirectDialBlamesTheOrigin: a direct exit's failed dial names the origin — its name did not
// resolve (neutral, the origin's), or it did not answer (the pair's, soft, as a proxy's 502 to a
// CONNECT) — where the same failure through a proxy exit blames the proxy and parks the exit. A
// dial whose context ended keeps its context error.
func TestDirectDialBlamesTheOrigin(t *testing.T) {
	closed, err := proxytest.ClosedAddr()
	if err != nil {
		t.Fatal(err)
	}
	var plain net.Dialer
	dnsFails := func(context.Context, string, string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "shop.example", IsNotFound: true}}
	}
	dnsTimesOut := func(context.Context, string, string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "i/o timeout", Name: "shop.example", IsTimeout: true}}
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for i, tt := range []struct {
		name string
		ctx  context.Context
		dial func(context.Context, string, string) (net.Conn, error)
		want pool.Verdict
		// viaProxy is the class of the same error on a proxy exit's dial: the proxy's name, or
		// the proxy itself.
		viaProxy pool.Class
	}{
		{"refused", context.Background(), plain.DialContext, upstreamUnreachable, pool.ClassProxyRefused},
		{"no such host", context.Background(), dnsFails, targetNameUnknown, pool.ClassProxyDNS},
		{"lookup timed out", context.Background(), dnsTimesOut, targetNameUnknown, pool.ClassTimeout},
	} {
		_, err := directDial(tt.dial)(tt.ctx, "tcp", closed)
		if err == nil {
			t.Fatalf("step %d (%s): dial = nil error", i, tt.name)
		}
		if got := DefaultClassifier.Classify(&Attempt{Err: err}); got != tt.want {
			t.Errorf("step %d (%s): Classify(direct dial error %v) = %+v, want %+v", i, tt.name, err, got, tt.want)
		}
		if got := DefaultClassifier.Classify(&Attempt{Err: mustFail(tt.dial(tt.ctx, "tcp", closed))}); got.Class != tt.viaProxy {
			t.Errorf("step %d (%s): Classify(proxy exit's dial error) = %+v, want class %s", i, tt.name, got, tt.viaProxy)
		}
	}
	_, err = directDial(plain.DialContext)(cancelled, "tcp", closed)
	var od *originDialError
	if !errors.Is(err, context.Canceled) || errors.As(err, &od) {
		t.Errorf("direct dial with a cancelled context = %v, want the context error unwrapped", err)
	}
}

// mustFail returns err, ignoring the connection a failing dial does not return.
func mustFail(_ net.Conn, err error) error { return err }

// TestDirectExitTransport: a direct exit's transport has no proxy and counts its connections;
// NewExitTransport builds the same.
func TestDirectExitTransport(t *testing.T) {
	tr, err := NewExitTransport(pool.DirectExit(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	if tr.Proxy != nil {
		u, _ := tr.Proxy(&http.Request{})
		t.Errorf("direct exit's transport has a Proxy func (%v), want nil", u)
	}
	if tr.DialContext == nil {
		t.Fatalf("direct exit's transport has no DialContext, want the counting direct dialer")
	}
	closed, err := proxytest.ClosedAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.DialContext(context.Background(), "tcp", closed)
	var od *originDialError
	if !errors.As(err, &od) {
		t.Errorf("direct exit's DialContext(closed port) = %v, want an *originDialError", err)
	}
}

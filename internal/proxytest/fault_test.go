package proxytest_test

import (
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
)

// isTimeout reports whether err is a timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestHang(t *testing.T) {
	t.Parallel()
	reg := &proxytest.Registry{}
	origin := newOrigin(t, reg)
	tlsOrigin := newTLSOrigin(t, reg)
	p := startProxy(t, proxytest.Config{Name: "exit-a", Hang: true})

	for _, u := range []string{origin.URL, tlsOrigin.URL} {
		c := newClient(t, p.URL(), tlsOrigin, nil)
		c.Timeout = 300 * time.Millisecond
		resp, err := c.Get(u)
		if err == nil {
			resp.Body.Close()
		}
		if !isTimeout(err) {
			t.Errorf("Get(%s) through a hanging proxy = %v, want a timeout", u, err)
		}
	}
	if r, c, j := p.Requests(), p.Connects(), p.Rejected(); r+c+j != 0 {
		t.Errorf("Requests, Connects, Rejected = %d, %d, %d, want 0, 0, 0", r, c, j)
	}
}

func TestHangAfterConnect(t *testing.T) {
	t.Parallel()
	reg := &proxytest.Registry{}
	origin := newOrigin(t, reg)
	tlsOrigin := newTLSOrigin(t, reg)
	p := startProxy(t, proxytest.Config{Name: "exit-a", HangAfterConnect: true, Registry: reg})

	var connectStatus atomic.Int64
	c := newClient(t, p.URL(), tlsOrigin, &connectStatus)
	c.Timeout = 300 * time.Millisecond
	resp, err := c.Get(tlsOrigin.URL)
	if err == nil {
		resp.Body.Close()
	}
	if !isTimeout(err) {
		t.Errorf("HTTPS Get through a silent tunnel = %v, want a timeout", err)
	}
	if got := connectStatus.Load(); got != http.StatusOK {
		t.Errorf("CONNECT status = %d, want 200", got)
	}
	if got := p.Connects(); got != 1 {
		t.Errorf("Connects() = %d, want 1", got)
	}

	// Plain HTTP still goes through.
	_, body := get(t, c, origin.URL)
	if want := "proto=HTTP/1.1 via=exit-a path=/ body="; body != want {
		t.Errorf("plain GET body = %q, want %q", body, want)
	}
}

func TestRefusesNonLoopbackTargets(t *testing.T) {
	t.Parallel()
	p := startProxy(t, proxytest.Config{Name: "exit-a"})

	// Reserved names and TEST-NET addresses: nothing is dialed and nothing is resolved.
	for _, u := range []string{"http://example.invalid/", "http://192.0.2.1:8080/"} {
		resp, _ := get(t, newClient(t, p.URL(), nil, nil), u)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("Get(%s) status = %d, want 403", u, resp.StatusCode)
		}
	}
	var connectStatus atomic.Int64
	c := newClient(t, p.URL(), nil, &connectStatus)
	if resp, err := c.Get("https://example.invalid/"); err == nil {
		resp.Body.Close()
		t.Errorf("HTTPS Get(example.invalid) succeeded, want an error")
	}
	if got := connectStatus.Load(); got != http.StatusForbidden {
		t.Errorf("CONNECT example.invalid:443 status = %d, want 403", got)
	}
	if got := p.Rejected(); got != 3 {
		t.Errorf("Rejected() = %d, want 3", got)
	}
}

func TestLatency(t *testing.T) {
	t.Parallel()
	const latency = 150 * time.Millisecond
	reg := &proxytest.Registry{}
	origin := newOrigin(t, reg)
	p := startProxy(t, proxytest.Config{Name: "exit-a", Latency: latency})
	start := time.Now()
	get(t, newClient(t, p.URL(), nil, nil), origin.URL)
	if elapsed := time.Since(start); elapsed < latency {
		t.Errorf("request took %v, want at least Latency %v", elapsed, latency)
	}
}

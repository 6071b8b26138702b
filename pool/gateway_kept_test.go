package pool_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/proxybreaker/proxybreaker/pool"
)

// With rotate=off a session's connection failures rest that session alone, as a static line's
// exit breaker would: the other sessions and the gateway keep serving, nothing is replaced, and
// the session is back after its rest.
func TestGatewayKeptSessionRestsAlone(t *testing.T) {
	p, clk, rec := gatewayPool(t, gwBase+" sessions=2 rotate=off")
	ctx := context.Background()
	s, other := p.Exits()[0].Label(), p.Exits()[1].Label()
	send(t, p, s, "a.example", gwOK)
	for i := range pool.DefaultExitSettings().FailureThreshold {
		send(t, p, s, fmt.Sprint("o", i, ".example"), gwReset)
	}
	if _, err := p.Pick(ctx, pool.Request{Origin: "a.example", Exit: s}); !errors.Is(err, pool.ErrNoHealthyExit) {
		t.Fatalf("Pick through the failing session = %v, want it resting", err)
	}
	for range 3 {
		l, err := p.Pick(ctx, pool.Request{Origin: "a.example"})
		if err != nil || l.Exit().Label() != other {
			t.Fatalf("Pick = %v, %v: want the other session, the gateway untouched", l.Exit(), err)
		}
		l.Report(gwOK)
	}
	if n := len(rec.list()); n != 0 {
		t.Errorf("%d rotations with rotate=off, want 0", n)
	}
	for _, g := range p.Snapshot().Gateways {
		if g.Breaker.State != 0 || len(g.Rotations) != 0 {
			t.Errorf("gateway %s: %v, rotations %v: want CLOSED, none", g.Gateway, g.Breaker.State, g.Rotations)
		}
	}
	// Back after its rest; a success closes it, and it serves as before.
	clk.Advance(pool.ExitRest + pool.ExitRest/2)
	send(t, p, s, "a.example", gwOK)
	send(t, p, s, "a.example", gwOK)
	send(t, p, s, "b.example", gwOK)
}

// A kept session failing again after its rest rests again; the gateway still hears nothing.
func TestGatewayKeptSessionFailingAfterRestRestsAgain(t *testing.T) {
	p, clk, _ := gatewayPool(t, gwBase+" sessions=2 rotate=off")
	ctx := context.Background()
	s := p.Exits()[0].Label()
	send(t, p, s, "a.example", gwOK)
	for i := range pool.DefaultExitSettings().FailureThreshold {
		send(t, p, s, fmt.Sprint("o", i, ".example"), gwReset)
	}
	clk.Advance(pool.ExitRest + pool.ExitRest/2)
	send(t, p, s, "b.example", gwReset) // its first attempt after the rest
	if _, err := p.Pick(ctx, pool.Request{Origin: "b.example", Exit: s}); !errors.Is(err, pool.ErrNoHealthyExit) {
		t.Fatalf("Pick after a failed first attempt = %v, want the session resting again", err)
	}
	if _, err := p.Pick(ctx, pool.Request{Origin: "b.example"}); err != nil {
		t.Fatalf("Pick through the gateway = %v, want the other session", err)
	}
}

// Gateway-level trouble still parks every kept session at once, and kept sessions that fail
// before they ever served count against the gateway.
func TestGatewayKeptSessionsShareTheGatewaysTrouble(t *testing.T) {
	p, _, _ := gatewayPool(t, gwBase+" sessions=3 rotate=off")
	ctx := context.Background()
	send(t, p, p.Exits()[0].Label(), "a.example", gwAuth)
	if _, err := p.Pick(ctx, pool.Request{Origin: "b.example"}); !errors.Is(err, pool.ErrNoHealthyExit) {
		t.Errorf("Pick after a 407 = %v, want every session parked", err)
	}

	n := pool.DefaultExitSettings().FailureThreshold // as many fresh sessions as trip the gateway
	p, _, _ = gatewayPool(t, gwBase+fmt.Sprint(" sessions=", n, " rotate=off"))
	for n, e := range p.Exits() {
		for i := range pool.DefaultExitSettings().FailureThreshold {
			// Origins of their own: an origin most exits fail at is blamed itself (the origin guard).
			send(t, p, e.Label(), fmt.Sprint("o", n, "-", i, ".example"), gwReset)
		}
	}
	for _, g := range p.Snapshot().Gateways {
		if g.Breaker.State == 0 {
			t.Errorf("gateway %s CLOSED after each of its fresh sessions failed, want it tripped", g.Gateway)
		}
	}
}

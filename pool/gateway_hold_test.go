package pool_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
)

// send picks exit for origin and reports v, failing the test when the pick is refused.
func send(t *testing.T, p *pool.Pool, exit, origin string, v pool.Verdict) {
	t.Helper()
	l, err := p.Pick(context.Background(), pool.Request{Origin: origin, Exit: exit})
	if err != nil {
		t.Fatalf("Pick(%s via %s) = %v", origin, exit, err)
	}
	l.Report(v)
}

// A session that serves several origins keeps serving them when one bans it: the ban is held on
// its pair, the other sessions serve the banning origin, and the session is replaced only once
// RotateBans origins have it out.
func TestGatewayHoldsABanWhileOtherOriginsServe(t *testing.T) {
	p, _, rec := gatewayPool(t, gwBase+" sessions=4")
	s := p.Exits()[0].Label()
	origins := []string{"a.example", "b.example", "c.example", "d.example", "e.example"}
	for _, o := range origins {
		send(t, p, s, o, gwOK)
	}
	for i, o := range origins[:pool.RotateBans-1] {
		send(t, p, s, o, gwBlocked)
		if n := len(rec.list()); n != 0 {
			t.Fatalf("after %d bans of a session serving %d origins: %d rotations, want the ban held", i+1, len(origins), n)
		}
		if _, err := p.Pick(context.Background(), pool.Request{Origin: o, Exit: s}); !errors.Is(err, pool.ErrNoHealthyExit) {
			t.Errorf("Pick(%s via the held session) = %v, want its pair OPEN", o, err)
		}
		l, err := p.Pick(context.Background(), pool.Request{Origin: o})
		if err != nil || l.Exit().Label() == s {
			t.Fatalf("Pick(%s) = %v, %v: want another session", o, l.Exit(), err)
		}
		l.Report(gwOK)
		send(t, p, s, origins[len(origins)-1], gwOK) // it keeps serving the others
	}
	send(t, p, s, origins[pool.RotateBans-1], gwBlocked)
	got := rec.list()
	if len(got) != 1 || got[0].Old.Label() != s || got[0].Reason != pool.RotationBlocked || got[0].Origin != origins[pool.RotateBans-1] {
		t.Fatalf("rotations after %d bans = %+v, want %s replaced, blocked by %s", pool.RotateBans, got, s, origins[pool.RotateBans-1])
	}
}

// A gateway scraping one origin replaces a session at its first ban: nothing else serves it.
func TestGatewayRotatesASessionItsOnlyOriginBans(t *testing.T) {
	p, _, rec := gatewayPool(t, gwBase+" sessions=4")
	s := p.Exits()[0].Label()
	send(t, p, s, "shop.example", gwOK)
	send(t, p, s, "shop.example", gwBlocked)
	if got := rec.list(); len(got) != 1 || got[0].Old.Label() != s {
		t.Fatalf("rotations = %+v, want %s replaced at its only origin's ban", got, s)
	}
}

// An origin banning most of the gateway's sessions gets fresh ones: holding would leave it
// fewer than half.
func TestGatewayRotatesWhenTheOriginBansMostSessions(t *testing.T) {
	p, _, rec := gatewayPool(t, gwBase+" sessions=4")
	var labels []string
	for _, e := range p.Exits() {
		labels = append(labels, e.Label())
		for _, o := range []string{"b.example", "c.example"} {
			send(t, p, e.Label(), o, gwOK)
		}
	}
	send(t, p, labels[0], "a.example", gwBlocked)
	send(t, p, labels[1], "a.example", gwBlocked)
	if n := len(rec.list()); n != 0 {
		t.Fatalf("a.example banned 2 of 4 sessions: %d rotations, want both held", n)
	}
	send(t, p, labels[2], "a.example", gwBlocked)
	got := rec.list()
	if len(got) != 1 || got[0].Old.Label() != labels[2] {
		t.Fatalf("rotations = %+v, want %s replaced once a.example banned 3 of 4", got, labels[2])
	}
}

// A held ban is probed like a static line's, and a served probe ends it: the session's next
// bans count from none.
func TestGatewayHeldBanEndsWhenItsProbeIsServed(t *testing.T) {
	p, clk, rec := gatewayPool(t, gwBase+" sessions=4")
	s := p.Exits()[0].Label()
	origins := []string{"a.example", "b.example", "c.example", "d.example"}
	for _, o := range origins {
		send(t, p, s, o, gwOK)
	}
	send(t, p, s, "a.example", gwBlocked)
	send(t, p, s, "b.example", gwBlocked)
	clk.Advance(time.Hour)
	send(t, p, s, "a.example", gwOK) // the probe
	send(t, p, s, "a.example", gwOK)
	send(t, p, s, "c.example", gwBlocked)
	if n := len(rec.list()); n != 0 {
		t.Fatalf("%d rotations, want none: a.example's ban ended, 2 origins have the session out", n)
	}
	send(t, p, s, "d.example", gwBlocked)
	if got := rec.list(); len(got) != 1 || got[0].Old.Label() != s {
		t.Fatalf("rotations = %+v, want %s replaced at its third ban in force", got, s)
	}
}

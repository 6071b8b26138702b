package sim

import (
	"testing"
	"time"
)

// TestBlockLimit checks a limiter whose block outlasts its period: Requests per period, then the
// request past them starts a block during which every request is refused with what is left of
// it, none counting; after the block the count starts afresh; a look ahead (Peek, ReadyAt) starts
// no block and says when the period ends.
func TestBlockLimit(t *testing.T) {
	sc := quiet(Round1World())
	sc.Origins = []Origin{{Block: BlockLimit{3, 10 * time.Second, time.Minute}}, {Block: BlockLimit{1, 10 * time.Second, time.Minute}, NoRetryAfter: true}}
	g := NewTruth(sc)
	h := find(t, g, sc.Exits, Healthy)
	q := Request{Origin: 0}
	const s = time.Second
	steps := []struct {
		at   time.Duration
		want Answer
		ra   time.Duration
	}{
		{0, OK, 0}, {2 * s, OK, 0},
		{11 * s, OK, 0}, // a new period, from 11 s
		{12 * s, OK, 0}, {13 * s, OK, 0},
		{14 * s, RateLimited, 60 * s}, // the fourth of the period starts a block until 74 s
		{30 * s, RateLimited, 44 * s}, // what is left of the block, not the period
		{73*s + 500*time.Millisecond, RateLimited, s},
		{74 * s, OK, 0}, {75 * s, OK, 0}, {76 * s, OK, 0}, // counted afresh from 74 s
	}
	for i, st := range steps {
		r := g.Send(h, q, Epoch.Add(st.at))
		if r.Answer != st.want || r.RetryAfter != st.ra {
			t.Errorf("step %d: Send(at %v) = %+v, want %v Retry-After %v", i, st.at, r, st.want, st.ra)
		}
	}
	// The period of 74 s is full: a look ahead is refused until 84 s and starts no block.
	now := Epoch.Add(80 * s)
	if r := g.Peek(h, q, now); r.Answer != RateLimited {
		t.Errorf("Peek(80 s) = %+v, want 429", r)
	}
	if got, want := g.ReadyAt(h, q, now), Epoch.Add(84*s); !got.Equal(want) {
		t.Errorf("ReadyAt(80 s) = %v, want %v (the period's end)", got.Sub(Epoch), want.Sub(Epoch))
	}
	if r := g.Send(h, q, Epoch.Add(84*s)); !r.OK() {
		t.Errorf("Send(84 s) = %+v, want 200: the look ahead started no block", r)
	}
	// Without Retry-After the block says nothing of when.
	q = Request{Origin: 1}
	for i, want := range []Answer{OK, RateLimited, RateLimited} {
		if r := g.Send(h, q, at(i, 2*s)); r.Answer != want || r.RetryAfter != 0 {
			t.Errorf("step %d: Send(no Retry-After origin) = %+v, want %v without Retry-After", i, r, want)
		}
	}
}

func TestBlockLimitString(t *testing.T) {
	o := Origin{Block: BlockLimit{30, time.Minute, 10 * time.Minute}}
	if got, want := o.String(), "30/1 min, block 10 min · Retry-After · challenge · http"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	o = Origin{Block: BlockLimit{6, 10 * time.Second, 2 * time.Minute}, NoRetryAfter: true}
	if got, want := o.String(), "6/10 s, block 2 min · no Retry-After · challenge · http"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

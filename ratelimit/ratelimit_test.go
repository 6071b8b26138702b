package ratelimit

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestBucketReadyPeeksWithoutTaking(t *testing.T) {
	b := NewBucket(PerSecond(2, 1)) // a token every 500 ms
	for range 5 {
		if ok, _ := b.Ready(at(0)); !ok {
			t.Fatal("Ready(t0) = false on a full bucket")
		}
	}
	if !Take(at(0), b, nil, nil) {
		t.Fatal("Take(t0) = false on a full bucket")
	}
	ok, next := b.Ready(at(100))
	if ok || !next.Equal(at(500)) {
		t.Errorf("Ready(t100) = %v, %v; want false, t500", ok, next.Sub(t0))
	}
	if Take(at(499), b, nil, nil) {
		t.Error("Take(t499) = true before the next token")
	}
	if !Take(at(500), b, nil, nil) {
		t.Error("Take(t500) = false when the token is due")
	}
	if ok, _ := (*Bucket)(nil).Ready(at(0)); !ok || !Take(at(0), nil, nil, nil) {
		t.Error("a nil bucket must always be ready and never refuse")
	}
}

// TestTakeAllOrNone: when one of several buckets has no token, none loses one.
func TestTakeAllOrNone(t *testing.T) {
	exit, origin := NewBucket(PerSecond(1, 2)), NewBucket(PerSecond(1, 1))
	if !Take(at(0), exit, nil, origin) {
		t.Fatal("first Take = false")
	}
	// origin is empty now; exit still has one token.
	for i := range 10 {
		if Take(at(10*i), exit, nil, origin) {
			t.Fatalf("Take #%d = true while the origin bucket is empty", i)
		}
	}
	if got := exit.lim.TokensAt(at(100)); got < 0.99 {
		t.Errorf("exit tokens after refused takes = %.3f, want its one token back (>= 1)", got)
	}
	if !Take(at(1000), exit, nil, origin) {
		t.Error("Take(t1000) = false once the origin refilled")
	}
	// Three buckets, the last one empty: the first two keep their tokens.
	third := NewBucket(PerSecond(1, 1))
	Take(at(2000), third, nil, nil)
	before := exit.lim.TokensAt(at(2000))
	if Take(at(2000), exit, origin, third) {
		t.Fatal("Take with an empty third bucket = true")
	}
	if got := exit.lim.TokensAt(at(2000)); got != before {
		t.Errorf("exit tokens %.3f → %.3f after a refused three-bucket take", before, got)
	}
	if n := testing.AllocsPerRun(100, func() { Take(at(3000), exit, origin, third) }); n != 0 {
		t.Errorf("Take allocates %v times, want 0", n)
	}
}

func TestLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		l    Limits
		want string
	}{
		{Limits{PerExit: Limit{Rate: -1, Burst: 1}}, "PerExit: rate -1"},
		{Limits{PerExit: Limit{Rate: 1}}, "PerExit: burst 0"},
		{Limits{Exits: map[string]Limit{"dc-1": {Rate: 1}}}, `Exits["dc-1"]: burst 0`},
		{Limits{Origins: map[string]Limit{"a.example": {Rate: 0, Burst: 2}}}, `Origins["a.example"]: rate 0`},
		{Limits{Adaptive: Adaptive{Decrease: 1.5}}, "Adaptive.Decrease = 1.5"},
		{Limits{Adaptive: Adaptive{Step: -0.1}}, "Adaptive.Step = -0.1"},
		{Limits{Adaptive: Adaptive{Floor: 20}}, "Floor 20 is above Adaptive.Ceiling 10"},
	} {
		if _, err := New(tc.l); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", tc.l, err, tc.want)
		}
	}
	g, err := New(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	a := g.Limits().Adaptive
	if a.Decrease != DefaultDecrease || a.Step != DefaultStep || a.Floor != DefaultFloor || a.Ceiling != DefaultCeiling {
		t.Errorf("defaults = %+v", a)
	}
}

// TestAIMD: the documented constants: halve on each cut down to one a minute, add a twentieth of
// the ceiling per success, and drop the bucket back at the ceiling when no per-pair limit is set.
func TestAIMD(t *testing.T) {
	g, _ := New(Limits{PerExit: PerSecond(8, 4)})
	p := g.NewPair("dc-1")
	if p.Bucket() != nil {
		t.Fatal("a fresh pair without a per-pair limit has a bucket")
	}
	want := []rate.Limit{4, 2, 1, 0.5}
	for i, w := range want {
		if got := p.Cut(at(i)); got != w {
			t.Fatalf("cut %d: rate %v, want %v", i+1, got, w)
		}
	}
	for range 20 {
		p.Cut(at(10))
	}
	if got := p.Bucket().Limit(); got != DefaultFloor {
		t.Errorf("after many cuts: rate %v, want the floor %v", got, DefaultFloor)
	}
	steps := 0
	for p.Bucket() != nil {
		steps++
		p.Grow(at(20 + steps))
		if steps > 100 {
			t.Fatal("never grew back")
		}
	}
	// From ~0 to 8/s in steps of 8/20 = 0.4/s: 20 successes.
	if steps != 20 {
		t.Errorf("successes to grow back from the floor = %d, want 20", steps)
	}
	if p.Throttled() {
		t.Error("Throttled() = true after growing back")
	}

	// With a per-pair limit the bucket stays, at its ceiling.
	g2, _ := New(Limits{PerPair: PerSecond(2, 2)})
	q := g2.NewPair("x")
	if q.Bucket() == nil || q.Bucket().Limit() != 2 {
		t.Fatal("a per-pair limit must give every pair a bucket at that rate")
	}
	q.Cut(at(0))
	for i := range 30 {
		q.Grow(at(i))
	}
	if b := q.Bucket(); b == nil || b.Limit() != 2 {
		t.Errorf("after growing back, per-pair bucket = %v, want rate 2", b.Limit())
	}

	// Disabled: cuts change nothing.
	g3, _ := New(Limits{Adaptive: Adaptive{Disabled: true}})
	r := g3.NewPair("x")
	r.Cut(at(0))
	if r.Bucket() != nil {
		t.Error("a disabled adaptation made a bucket")
	}
}

// TestUnlimitedExitAdaptsToDefaultCeiling: an exit with no rate (or rate.Inf) adapts towards the
// default ceiling, not towards infinity.
func TestUnlimitedExitAdaptsToDefaultCeiling(t *testing.T) {
	g, _ := New(Limits{Exits: map[string]Limit{"inf": {Rate: rate.Inf}}})
	for _, label := range []string{"plain", "inf"} {
		p := g.NewPair(label)
		if got := p.Cut(at(0)); got != DefaultCeiling*DefaultDecrease {
			t.Errorf("%s: first cut = %v, want %v", label, got, DefaultCeiling*DefaultDecrease)
		}
	}
}

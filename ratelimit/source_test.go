package ratelimit

import (
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// countSource is a Source holding n tokens that never refill.
type countSource struct {
	n        atomic.Int64
	returned atomic.Int64
}

func (s *countSource) Ready(now time.Time) (bool, time.Time) {
	if s.n.Load() > 0 {
		return true, time.Time{}
	}
	return false, now.Add(time.Second)
}

func (s *countSource) Take(time.Time) bool {
	for {
		n := s.n.Load()
		if n <= 0 {
			return false
		}
		if s.n.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

func (s *countSource) Return(time.Time)  { s.n.Add(1); s.returned.Add(1) }
func (s *countSource) Limit() rate.Limit { return 7 }

// TestSourceBucket: a bucket backed by a Source peeks and takes through it, and an all-or-none Take
// that fails on a local bucket gives the source's token back.
func TestSourceBucket(t *testing.T) {
	src := &countSource{}
	src.n.Store(2)
	b := SourceBucket(src)
	if SourceBucket(nil) != nil {
		t.Error("SourceBucket(nil) != nil")
	}
	if ok, _ := b.Ready(at(0)); !ok || b.Limit() != 7 {
		t.Fatalf("Ready(t0), Limit() = %v, %v; want true, 7", ok, b.Limit())
	}
	if !Take(at(0), b, nil, nil) {
		t.Fatal("Take(t0) = false with two tokens in the source")
	}
	origin := NewBucket(PerSecond(1, 1))
	Take(at(0), origin, nil, nil) // empty the origin bucket
	if Take(at(1), b, nil, origin) {
		t.Fatal("Take(source, origin) = true with the origin bucket empty")
	}
	if got, ret := src.n.Load(), src.returned.Load(); got != 1 || ret != 1 {
		t.Errorf("after a refused take: source holds %d tokens (%d returned), want 1 (1)", got, ret)
	}
	if !Take(at(1000), origin, b, nil) {
		t.Fatal("Take(origin, source) = false once the origin refilled")
	}
	if ok, next := b.Ready(at(1000)); ok || !next.Equal(at(2000)) {
		t.Errorf("Ready on an empty source = %v, %v; want false, t2000", ok, next.Sub(t0))
	}
	if Take(at(1000), b, nil, nil) {
		t.Error("Take on an empty source = true")
	}
	src.n.Store(1 << 40)
	local := NewBucket(PerSecond(1e9, 1e9))
	if n := testing.AllocsPerRun(100, func() { Take(at(3000), local, b, nil) }); n != 0 {
		t.Errorf("Take with a source allocates %v times, want 0", n)
	}
}

// TestGateExitSource: Limits.ExitSource backs each limited exit's bucket; unlimited exits, and
// exits the function answers nil for, keep what they had.
func TestGateExitSource(t *testing.T) {
	var asked []string
	src := &countSource{}
	g, err := New(Limits{
		PerExit: PerSecond(5, 2),
		Exits:   map[string]Limit{"free": {}, "local": PerSecond(3, 1)},
		ExitSource: func(label string, l Limit) Source {
			asked = append(asked, label)
			if want := g0ExitLimit(label); l != want {
				t.Errorf("ExitSource(%q, %+v), want %+v", label, l, want)
			}
			if label == "dc-1" {
				return src
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if b := g.ExitBucket("dc-1"); b == nil || b.src != src {
		t.Error("ExitBucket(dc-1) is not backed by the source")
	}
	if b := g.ExitBucket("free"); b != nil {
		t.Error("ExitBucket(free) != nil for an unlimited exit")
	}
	if b := g.ExitBucket("dc-2"); b == nil || b.src != nil || b.Limit() != 5 {
		t.Error("ExitBucket(dc-2) is not a local bucket at 5/s when the source answers nil")
	}
	if b := g.ExitBucket("local"); b == nil || b.src != nil || b.Limit() != 3 {
		t.Error("ExitBucket(local) is not a local bucket at its own 3/s")
	}
	if want := []string{"dc-1", "dc-2", "local"}; len(asked) != len(want) {
		t.Errorf("ExitSource asked for %v, want %v (never for an unlimited exit)", asked, want)
	}
}

func g0ExitLimit(label string) Limit {
	if label == "local" {
		return PerSecond(3, 1)
	}
	return PerSecond(5, 2)
}

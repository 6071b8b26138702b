package clock

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func fired(tm Timer) bool {
	select {
	case <-tm.C():
		return true
	default:
		return false
	}
}

func TestFakeTimers(t *testing.T) {
	f := NewFake(t0)
	a, b := f.NewTimer(time.Second), f.NewTimer(3*time.Second)
	c := f.NewTimer(2 * time.Second)
	if !c.Stop() {
		t.Fatal("Stop() of a pending timer = false, want true")
	}
	if f.Timers() != 2 {
		t.Fatalf("Timers() = %d, want 2", f.Timers())
	}
	f.Advance(999 * time.Millisecond)
	if fired(a) || fired(b) {
		t.Fatal("a timer fired before its deadline")
	}
	f.Advance(time.Millisecond)
	if !fired(a) || fired(b) {
		t.Fatal("at 1s: want a fired and b pending")
	}
	if a.Stop() {
		t.Error("Stop() of a fired timer = true, want false")
	}
	f.Set(t0) // backwards: nothing fires, the clock reads t0
	if got := f.Now(); !got.Equal(t0) || fired(b) {
		t.Fatalf("after Set(t0): Now() = %v, b fired = %v", got, fired(b))
	}
	f.Set(t0.Add(time.Hour))
	if !fired(b) || fired(c) {
		t.Fatal("at 1h: want b fired and the stopped c silent")
	}
	if f.Timers() != 0 {
		t.Errorf("Timers() = %d after every timer fired, want 0", f.Timers())
	}
	if z := f.NewTimer(0); !fired(z) {
		t.Error("NewTimer(0) did not fire at once")
	}
}

func TestSystemClock(t *testing.T) {
	before := time.Now()
	if now := System.Now(); now.Before(before) {
		t.Errorf("System.Now() = %v, before %v", now, before)
	}
	tm := System.NewTimer(time.Hour)
	if !tm.Stop() {
		t.Error("Stop() of a pending system timer = false")
	}
}

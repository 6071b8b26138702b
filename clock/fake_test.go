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
	if tm.Reset(time.Millisecond) {
		t.Error("Reset() of a stopped system timer = true")
	}
	<-tm.C()
	ran := make(chan struct{}, 2)
	fn := System.AfterFunc(time.Hour, func() { ran <- struct{}{} })
	if !fn.Reset(time.Millisecond) {
		t.Error("Reset() of a pending system AfterFunc timer = false")
	}
	<-ran
	if fn.Reset(time.Millisecond) {
		t.Error("Reset() of a fired system AfterFunc timer = true")
	}
	<-ran // it runs again
}

// TestFakeReset: Reset re-arms a pending, stopped or fired timer at Now()+d and reports whether it
// was pending; a channel timer delivers no time from before its Reset.
func TestFakeReset(t *testing.T) {
	f := NewFake(t0)
	calls := 0
	fn := f.AfterFunc(time.Second, func() { calls++ })
	if !fn.Reset(3 * time.Second) {
		t.Error("step 0: Reset() of a pending timer = false, want true")
	}
	f.Advance(2 * time.Second)
	if calls != 0 {
		t.Fatalf("step 1: at 2s: calls = %d, want 0 (moved to 3s)", calls)
	}
	f.Advance(time.Second)
	if calls != 1 {
		t.Fatalf("step 2: at 3s: calls = %d, want 1", calls)
	}
	if fn.Reset(time.Second) {
		t.Error("step 3: Reset() of a fired timer = true, want false")
	}
	if f.Timers() != 1 {
		t.Fatalf("step 3: Timers() = %d after Reset of a fired timer, want 1", f.Timers())
	}
	f.Advance(time.Second)
	if calls != 2 {
		t.Fatalf("step 4: at 4s: calls = %d, want 2 (fired again)", calls)
	}
	if fn.Stop() || fn.Reset(time.Second) {
		t.Error("step 5: Stop() or Reset() of a fired timer = true, want false")
	}
	if !fn.Stop() {
		t.Error("step 6: Stop() after Reset = false, want true")
	}
	if fn.Reset(time.Second) {
		t.Error("step 7: Reset() of a stopped timer = true, want false")
	}
	f.Advance(time.Second)
	if calls != 3 {
		t.Fatalf("step 8: at 6s: calls = %d, want 3", calls)
	}

	ch := f.NewTimer(time.Second)
	f.Advance(time.Second) // fires: a time waits in the channel
	if ch.Reset(time.Second) {
		t.Error("step 9: Reset() of a fired channel timer = true, want false")
	}
	if fired(ch) {
		t.Error("step 9: a time from before Reset was delivered")
	}
	f.Advance(time.Second)
	if !fired(ch) {
		t.Error("step 10: the Reset channel timer did not fire at its new deadline")
	}
	if ch.Reset(0); !fired(ch) {
		t.Error("step 11: Reset(0) of a channel timer did not fire at once")
	}
	if f.Timers() != 0 {
		t.Errorf("Timers() = %d at the end, want 0", f.Timers())
	}
}

package pool

import (
	"testing"
	"time"
)

// TestPairFlagsKeepMuteAndBansApart: the mute flag and the memory of bans share one word; setting
// either leaves the other as it was, and the memory decays one ban per OffenceDecay clean, from
// the instant the last ban ended (none before it, whatever the clock says).
func TestPairFlagsKeepMuteAndBansApart(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var f pairFlags
	if f.muted() || f.offences(t0) != 0 {
		t.Fatalf("zero pairFlags: muted %v, %d bans; want false, 0", f.muted(), f.offences(t0))
	}
	f.banEnded(t0, t0.Add(10*time.Minute))
	f.setMuted(true)
	f.banEnded(t0.Add(time.Hour), t0.Add(2*time.Hour))
	if !f.muted() {
		t.Errorf("banEnded cleared the mute flag")
	}
	for i, c := range []struct {
		at   time.Time
		want int
	}{
		{t0, 2}, // before the last ban ended: nothing decays
		{t0.Add(2 * time.Hour), 2},
		{t0.Add(2*time.Hour + OffenceDecay - time.Minute), 2},
		{t0.Add(2*time.Hour + OffenceDecay), 1},
		{t0.Add(2*time.Hour + 2*OffenceDecay), 0},
	} {
		if got := f.offences(c.at); got != c.want {
			t.Errorf("%d: offences(%v) = %d, want %d", i, c.at.Sub(t0), got, c.want)
		}
	}
	f.setMuted(false)
	if f.muted() || f.offences(t0.Add(2*time.Hour)) != 2 {
		t.Errorf("setMuted(false): muted %v, %d bans; want false, 2", f.muted(), f.offences(t0.Add(2*time.Hour)))
	}
	for range 5 {
		f.banEnded(t0.Add(3*time.Hour), t0.Add(4*time.Hour))
	}
	if got := f.offences(t0.Add(4 * time.Hour)); got != MaxOffences {
		t.Errorf("after many bans: %d remembered, want MaxOffences %d", got, MaxOffences)
	}
}

// TestOffenceStatsHardens: an origin hardens once hardenMinRepeats repeat bans averaged
// hardenRatio times its first ones, and not before, nor when they are as long.
func TestOffenceStatsHardens(t *testing.T) {
	var s, same offenceStats
	for range 10 {
		s.record(false, 10*time.Minute)
		same.record(false, 10*time.Minute)
		same.record(true, 12*time.Minute)
	}
	for i := range hardenMinRepeats {
		if s.hardens() {
			t.Fatalf("hardens after %d repeat bans, want not before %d", i, hardenMinRepeats)
		}
		s.record(true, 30*time.Minute)
	}
	if !s.hardens() {
		t.Errorf("repeat bans of 30 min against first ones of 10: does not harden")
	}
	if same.hardens() {
		t.Errorf("repeat bans of 12 min against first ones of 10: hardens")
	}
	s.record(true, -time.Minute) // ignored
	if s.nRepeat.Load() != hardenMinRepeats {
		t.Errorf("a negative length was counted")
	}
}

// TestPairFlagsConfirmLeavesTheRestAlone: a ban's confirmation shares the word with the mute flag
// and the memory; confirming and taking it change neither, and banEnded forgets it.
func TestPairFlagsConfirmLeavesTheRestAlone(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var f pairFlags
	if f.takeConfirmed() {
		t.Fatalf("zero pairFlags: confirmed")
	}
	f.banEnded(t0, t0.Add(10*time.Minute))
	f.setMuted(true)
	f.confirm()
	if f.offences(t0.Add(time.Hour)) != 1 || !f.muted() {
		t.Errorf("confirm: %d bans, muted %v; want 1, true", f.offences(t0.Add(time.Hour)), f.muted())
	}
	if !f.takeConfirmed() || f.takeConfirmed() {
		t.Errorf("takeConfirmed after confirm: want true once, then false")
	}
	f.confirm()
	f.banEnded(t0.Add(time.Hour), t0.Add(2*time.Hour))
	if f.takeConfirmed() {
		t.Errorf("banEnded kept the confirmation of the ban it ended")
	}
	if got := f.offences(t0.Add(2*time.Hour + OffenceDecay)); got != 1 || !f.muted() {
		t.Errorf("after banEnded: %d bans an OffenceDecay after the last, muted %v; want 1, true", got, f.muted())
	}
}

package sim

import (
	"slices"
	"testing"
	"time"
)

// TestMergeBans: a pair's bans less than BanMergeGap apart are one episode; farther apart, two.
func TestMergeBans(t *testing.T) {
	at := func(m int) time.Time { return Epoch.Add(time.Duration(m) * time.Minute) }
	ws := []Window{{at(0), at(10)}, {at(11), at(20)}, {at(22), at(30)}, {at(40), at(41)}}
	got := mergeBans(ws, 2*time.Minute)
	want := []Window{{at(0), at(20)}, {at(22), at(30)}, {at(40), at(41)}}
	if len(got) != len(want) {
		t.Fatalf("mergeBans = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Window != want[i] || got[i].met || got[i].bans[0].From != want[i].From || got[i].bans[len(got[i].bans)-1].To != want[i].To {
			t.Errorf("mergeBans[%d] = %+v, want %v, not met", i, got[i], want[i])
		}
	}
}

// TestRecoveryLog: only the episodes a strategy met are measured — recovered when a success
// follows their end, never recovered when none does — the others are counted as not met, and
// episodes that end after the horizon are not counted at all.
func TestRecoveryLog(t *testing.T) {
	at := func(m int) time.Time { return Epoch.Add(time.Duration(m) * time.Minute) }
	bans := [][]Window{
		{{at(0), at(10)}, {at(30), at(40)}}, // pair 0: met and recovered; met and never recovered
		{{at(0), at(10)}},                   // pair 1: never met, never recovered
		{{at(5), at(15)}},                   // pair 2: never met, a success after it
		{{at(50), at(70)}},                  // pair 3: met, ends after the horizon
	}
	l := newRecoveryLog(bans, at(60))
	var m Metrics
	l.met(0, at(9))
	l.served(0, at(3), &m) // during the ban: not a recovery
	l.served(0, at(12), &m)
	l.met(0, at(31))
	l.served(2, at(20), &m)
	l.met(3, at(55))
	l.finish(&m)
	if len(m.Recovery) != 1 || m.Recovery[0] != 2*time.Minute {
		t.Errorf("Recovery = %v, want [2m0s]", m.Recovery)
	}
	if m.Unrecovered != 1 || m.Unmet != 2 {
		t.Errorf("Unrecovered, Unmet = %d, %d; want 1, 2", m.Unrecovered, m.Unmet)
	}
	if got, want := UnrecoveredString(m), "1 / 2 (2 not met)"; got != want {
		t.Errorf("UnrecoveredString = %q, want %q", got, want)
	}
}

// TestRecoveryLogCutsAtAServedGap: two bans merged into one episode are measured apart when the
// pair is served between them — the first recovered at that success, the second met or not on
// its own answers (here: met, then never recovered; and in a second pair: never met).
func TestRecoveryLogCutsAtAServedGap(t *testing.T) {
	at := func(s int) time.Time { return Epoch.Add(time.Duration(s) * time.Second) }
	bans := [][]Window{
		{{at(0), at(600)}, {at(660), at(1200)}}, // 60 s apart: one episode until the pair is served at 630
		{{at(0), at(600)}, {at(660), at(1200)}}, // the same, the second ban never met
		{{at(0), at(600)}, {at(660), at(1200)}}, // never served in the gap: one episode
	}
	l := newRecoveryLog(bans, at(3600))
	var m Metrics
	l.met(0, at(100))
	l.served(0, at(630), &m)
	l.met(0, at(700))
	l.met(1, at(100))
	l.served(1, at(627), &m)
	l.met(2, at(100))
	l.served(2, at(1230), &m)
	l.finish(&m)
	want := []time.Duration{30 * time.Second, 27 * time.Second, 30 * time.Second}
	if !slices.Equal(m.Recovery, want) {
		t.Errorf("Recovery = %v, want %v", m.Recovery, want)
	}
	if m.Unrecovered != 1 || m.Unmet != 1 {
		t.Errorf("Unrecovered, Unmet = %d, %d; want 1, 1", m.Unrecovered, m.Unmet)
	}
}

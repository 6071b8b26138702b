package redisstore

import (
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/store"
)

func TestEncodeDecode(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123, time.UTC)
	sb := pool.SavedBreaker{Scope: pool.ScopePair, Exit: "dc:1{x}", Origin: "a.example:8443",
		Saved: breaker.Saved{State: breaker.Open, Level: 2, Trips: 3, NextProbe: at.Add(time.Minute), LastFailure: "rate_limited", Changed: at}}
	s, err := encode("m1", sb)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s, "01772366400000000123|") {
		t.Errorf("encode() = %q, want the 20-digit changed prefix", s)
	}
	e, err := decode(s)
	if err != nil || e.Member != "m1" || e.Exit != sb.Exit || !e.Changed.Equal(at) || !e.NextProbe.Equal(sb.NextProbe) || e.Trips != 3 {
		t.Errorf("decode(encode()) = %+v, %v", e, err)
	}
	if got := id(store.KeyOf(sb)); got != "pair:dc%3A1%7Bx%7D:a.example%3A8443" {
		t.Errorf("id() = %q: want no colon or brace from the label or origin", got)
	}
	for _, bad := range []string{
		"",
		"123|{}",
		"0000000000000000000x|{}",
		`01772366400000000123|{"m":"m1","scope":"pair","exit":"x","origin":"o","state":"open","changed":"2026-03-01T12:00:00Z"}`,
		`00000000000000000000|{"m":"","scope":"pair","exit":"x","origin":"o","state":"open"}`,
		`00000000000000000000|{"m":"m","scope":"pair","origin":"o","state":"open"}`,
		`00000000000000000000|{"m":"m","scope":"origin","state":"open"}`,
		`00000000000000000000|{"m":"m","scope":"exit","exit":"x","state":"half_open"}`,
		`00000000000000000000|{"m":"m","scope":"exit","exit":"x","state":"open","level":99}`,
		`00000000000000000000|not json`,
	} {
		if _, err := decode(bad); err == nil {
			t.Errorf("decode(%q) = nil error", bad)
		}
	}
}

// FuzzDecode: whatever arrives on the channel or in a key, decode never panics, and what it
// accepts encodes back to an entry it accepts again.
func FuzzDecode(f *testing.F) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	good, _ := encode("m", pool.SavedBreaker{Scope: pool.ScopeExit, Exit: "x0",
		Saved: breaker.Saved{State: breaker.Open, Parked: true, NextProbe: at, Changed: at}})
	f.Add(good)
	f.Add("00000000000000000000|{}")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		e, err := decode(s)
		if err != nil {
			return
		}
		again, err := encode(e.Member, e.SavedBreaker)
		if err != nil {
			t.Fatalf("encode of a decoded entry: %v", err)
		}
		if _, err := decode(again); err != nil {
			t.Fatalf("decode(encode(decode(%q))) = %v", s, err)
		}
	})
}

func TestSettingsValidate(t *testing.T) {
	for _, tc := range []struct {
		s    Settings
		want string
	}{
		{Settings{Namespace: "a}b"}, "Namespace"},
		{Settings{Namespace: strings.Repeat("n", 65)}, "Namespace"},
		{Settings{Linger: -1}, "Linger"},
		{Settings{ClaimTimeout: -1}, "ClaimTimeout"},
		{Settings{OpTimeout: -1}, "OpTimeout"},
		{Settings{HealthInterval: -1}, "HealthInterval"},
		{Settings{LeaseWait: -1}, "LeaseWait"},
		{Settings{LeaseTTL: -1}, "LeaseTTL"},
		{Settings{QueueSize: -1}, "QueueSize"},
		{Settings{LeaseBatch: -1}, "LeaseBatch"},
		{Settings{FallbackShare: 1.5}, "FallbackShare"},
	} {
		s := tc.s
		if err := s.fill(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("fill(%+v) = %v, want an error naming %s", tc.s, err, tc.want)
		}
	}
	var s Settings
	if err := s.fill(); err != nil || s.Namespace != DefaultNamespace || s.Member == "" || s.Linger != DefaultLinger {
		t.Errorf("fill(zero) = %v, %+v", err, s)
	}
}

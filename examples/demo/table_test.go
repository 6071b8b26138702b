package main

import (
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// TestCellHalfOpenOnlyWithAProbeOut: a breaker the pool computes HALF_OPEN after its window, with
// no probe out, reads "probe due"; "half-open" is kept for one whose probe is in flight
// (regression: the table said half-open seconds before the line saying a probe went through, and
// to the end for pairs that were never probed again).
func TestCellHalfOpenOnlyWithAProbeOut(t *testing.T) {
	const unit = time.Second
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, tc := range []struct {
		b         breaker.Snapshot
		text, key string
	}{
		{breaker.Snapshot{State: breaker.Closed}, "closed", "closed"},
		{breaker.Snapshot{State: breaker.Open, NextProbe: t0.Add(2500 * time.Millisecond)}, "OPEN 2.5s", "OPEN"},
		{breaker.Snapshot{State: breaker.Open, Parked: true, NextProbe: t0.Add(14 * unit)}, "PARKED 14.0s", "PARKED"},
		{breaker.Snapshot{State: breaker.HalfOpen, NextProbe: t0.Add(-unit)}, "probe due", "probe due"},
		{breaker.Snapshot{State: breaker.HalfOpen, Parked: true, NextProbe: t0.Add(-unit)}, "probe due", "probe due"},
		{breaker.Snapshot{State: breaker.HalfOpen, ProbesInFlight: 1, NextProbe: t0.Add(-unit)}, "half-open", "half-open"},
	} {
		if text, key := cell(tc.b, t0); text != tc.text || key != tc.key {
			t.Errorf("step %d: cell(%+v) = %q, %q, want %q, %q", i, tc.b, text, key, tc.text, tc.key)
		}
	}
}

package main

import (
	"fmt"
	"time"

	"github.com/proxybreaker/proxybreaker/probe"
)

// summary is what the one-line summary says about a report's exits and targets.
type summary struct {
	exits, healthy, failing, parked int
	targets                         int
}

// summarize counts rep's exits by what the run found: parked (a permanent exit-wide failure —
// 407, refused gateway, proxy DNS — that a -state warm start parks), healthy (the exit's own
// verdict under the run's policy is HEALTHY) or failing (the rest); and its targets.
func summarize(rep *probe.Report) summary {
	var s summary
	for e := range rep.Exits() {
		s.exits++
		switch {
		case e.Permanent > 0:
			s.parked++
		case e.Verdict == probe.Healthy:
			s.healthy++
		default:
			s.failing++
		}
	}
	for range rep.Targets() {
		s.targets++
	}
	return s
}

// summaryLine is the line proxyprobe writes on stderr at the end of a run whose stderr is not a
// terminal, for a scheduler's log beside the JSON on stdout:
//
//	proxyprobe: DEGRADED — 97/100 exits healthy, 2 failing, 1 parked; 4 targets; 1.2s (deadline 10s)
//
// and, when the list priced its exits (cost-per-gb=, cost-per-request=), the run's estimated spend
// after the targets ("4 targets; spend 0.001531; 1.2s").
//
// It names no exit and no target, so it holds no credentials whatever the lists held.
func summaryLine(rep *probe.Report) string {
	s := summarize(rep)
	targets := "targets"
	if s.targets == 1 {
		targets = "target"
	}
	cut := ""
	if rep.Overall.Cut > 0 {
		cut = fmt.Sprintf(", %d of %d probes cut by the deadline", rep.Overall.Cut, rep.Overall.Probes)
	}
	spend := ""
	if rep.Overall.Spend > 0 {
		spend = fmt.Sprintf("spend %.6f; ", rep.Overall.Spend)
	}
	return fmt.Sprintf("proxyprobe: %s — %d/%d exits healthy, %d failing, %d parked; %d %s; %s%s (deadline %s%s)",
		rep.Verdict, s.healthy, s.exits, s.failing, s.parked, s.targets, targets, spend,
		roundElapsed(rep.ElapsedMS), time.Duration(rep.DeadlineMS)*time.Millisecond, cut)
}

// roundElapsed turns milliseconds into a duration short enough to read: tenths of a second from
// a second on, milliseconds below.
func roundElapsed(ms float64) time.Duration {
	d := time.Duration(ms * float64(time.Millisecond))
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

package probe

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// Capacities answers the operator's capacity question for each origin r probed — how many exits
// can serve it now, how fast it answers, what rate its 429s allow — as a pool of exits would
// answer it (pool.Capacity) after meeting r's answers: each probe's verdict is reported on a pick
// pinned to its exit, at its latency, on a fake clock from r.Started, and each origin's capacity
// is read at the end of the run. exits are the exits probed (by label, as in r.Results); results
// whose exit is not among them, and probes that never got an answer (queued, cut by the deadline,
// canceled), are left out. Origins come in the order they first appear in r.Results.
func Capacities(r *Report, exits []*pool.Exit) ([]pool.Capacity, error) {
	clk := clock.NewFake(r.Started)
	p, err := pool.New(pool.WithExits(exits...), pool.WithClock(clk), pool.WithInlineSweep())
	if err != nil {
		return nil, fmt.Errorf("probe: capacity: %w", err)
	}
	defer p.Close()
	known := make(map[string]bool, len(exits))
	for _, e := range exits {
		known[e.Label()] = true
	}
	var origins []string
	seen := map[string]bool{}
	ctx := context.Background()
	for i := range r.Results {
		res := &r.Results[i]
		if !seen[res.Origin] {
			seen[res.Origin] = true
			origins = append(origins, res.Origin)
		}
		switch res.ErrorKind {
		case "deadline", "canceled":
			continue
		}
		if !known[res.Exit] || res.Phase == phaseQueued.String() {
			continue
		}
		l, err := p.PickAt(ctx, r.Started, pool.Request{Origin: res.Origin, Exit: res.Exit})
		if err != nil {
			continue // a breaker the run's earlier answers opened: the pool would not have sent it
		}
		v := pool.Verdict{Outcome: res.Outcome, Scope: res.Scope, Class: res.Class, RetryAfter: time.Duration(res.RetryAfterMS) * time.Millisecond}
		l.ReportAt(r.Started.Add(time.Duration(res.LatencyMS*float64(time.Millisecond))), v)
	}
	end := r.Started.Add(time.Duration(r.ElapsedMS * float64(time.Millisecond)))
	caps := make([]pool.Capacity, 0, len(origins))
	for _, o := range origins {
		caps = append(caps, p.CapacityAt(end, o))
	}
	return caps, nil
}

// writeCapacity writes the capacity table of WriteTable, if r has capacities.
func writeCapacity(w io.Writer, caps []pool.Capacity) {
	if len(caps) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ORIGIN\tUSABLE\tSLOW\tLATENCY ms\tRATE/s PER EXIT\tRATE/s")
	for _, c := range caps {
		perExit, rate := "-", "-" // no 429 taught a window: unknown, not unlimited
		if c.PerExit > 0 {
			perExit, rate = fmt.Sprintf("%.2f", c.PerExit), fmt.Sprintf("%.2f", c.Rate)
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%d\t%.0f\t%s\t%s\n", c.Origin, c.Usable, c.Exits, c.Slow, float64(c.Latency)/float64(time.Millisecond), perExit, rate)
	}
	tw.Flush()
	fmt.Fprintln(w)
}

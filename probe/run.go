package probe

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// errDeadline is the cause the run's context is cancelled with when its deadline passes.
var errDeadline = errors.New("probe: deadline")

// job is one planned probe, exit × target, and how far it got: Run reads these for the probes still
// in flight at the deadline.
type job struct {
	exit, target int
	phase        atomic.Int32
	start        atomic.Int64 // when the probe started, Unix nanoseconds; 0 if it has not
	status       atomic.Int32 // the response's status once its headers are in
	latency      atomic.Int64 // the time to the headers, in nanoseconds
}

// finished is a worker's report of one job.
type finished struct {
	job int
	res Result
}

// Run probes every target through every exit and returns the report. It returns as soon as the
// deadline (Config.Deadline) passes, whatever the exits do: probes still in flight are cancelled
// and reported as cut ("deadline", or "canceled" when ctx ended first) in the phase they had
// reached; the time left is only that of building the report. It never returns nil.
//
// Probes are sent in rounds: each round covers every exit once, in a shuffled (but fixed) order so
// that a block of hanging exits does not take every worker at once, and the targets evenly, so a
// deadline that cuts the run short leaves no exit or target unprobed while others were probed
// twice. Results are reported exit by exit, targets in the order given.
func (p *Prober) Run(ctx context.Context) *Report {
	started := time.Now()
	dctx, cancel := context.WithDeadlineCause(ctx, started.Add(p.cfg.Deadline), errDeadline)
	defer cancel()

	jobs := p.plan()
	out := make(chan finished, len(jobs)) // buffered: a worker never blocks on reporting
	feed := make(chan int)
	var wg sync.WaitGroup
	for range min(p.cfg.Concurrency, len(jobs)) {
		wg.Go(func() {
			for i := range feed {
				out <- finished{i, p.probe(dctx, &jobs[i])}
			}
		})
	}
	go func() {
		defer close(feed)
		for i := range jobs {
			select {
			case feed <- i:
			case <-dctx.Done():
				return
			}
		}
	}()

	nt := len(p.targets)
	results := make([]Result, len(jobs))
	reported := make([]bool, len(jobs))
	done := 0
	record := func(f finished) {
		j := &jobs[f.job]
		results[j.exit*nt+j.target] = f.res
		reported[f.job] = true
		done++
		if p.cfg.Progress != nil {
			p.cfg.Progress(done, len(jobs))
		}
	}
collect:
	for done < len(jobs) {
		select {
		case f := <-out:
			record(f)
		case <-dctx.Done():
			// Keep what finished before the deadline, and no more: waiting for the probes in
			// flight to unwind would let a loaded machine stretch the deadline.
			for {
				select {
				case f := <-out:
					record(f)
					continue
				default:
				}
				break collect
			}
		}
	}

	if done == len(jobs) {
		wg.Wait() // every worker has reported and is leaving: Run leaves nothing running
	} else {
		// The rest were never started or are still unwinding: their contexts are cancelled, so
		// they leave soon, reporting into the buffered channel nobody reads any more. Each is
		// recorded as cut in the last phase it reached.
		kind := cutKind(dctx)
		now := time.Now()
		for i := range jobs {
			if reported[i] {
				continue
			}
			j := &jobs[i]
			res := p.newResult(j)
			res.ErrorKind, res.Phase = kind, phase(j.phase.Load()).String()
			if code := j.status.Load(); code > 0 {
				res.Status, res.LatencyMS = int(code), msOf(time.Duration(j.latency.Load()))
			} else if st := j.start.Load(); st > 0 {
				res.LatencyMS = msOf(now.Sub(time.Unix(0, st)))
			}
			res.Outcome, res.Class = cutVerdict()
			results[j.exit*nt+j.target] = res
		}
	}
	for _, rt := range p.bases {
		rt.CloseIdleConnections()
	}

	rep := NewReport(results, p.policy)
	rep.Started = started
	rep.ElapsedMS = msSince(started)
	rep.DeadlineMS = p.cfg.Deadline.Milliseconds()
	return rep
}

// plan lists exits × targets in rounds: in round r, exit e probes target (e+r) mod T, the exits
// in an order shuffled by a fixed seed (so two runs over one list probe in the same order).
func (p *Prober) plan() []job {
	e, t := len(p.exits), len(p.targets)
	order := rand.New(rand.NewPCG(planSeed, planSeed)).Perm(e)
	jobs := make([]job, e*t)
	i := 0
	for r := range t {
		for _, x := range order {
			jobs[i].exit, jobs[i].target = x, (x+r)%t
			i++
		}
	}
	return jobs
}

// planSeed seeds the shuffle of the exits.
const planSeed = 0x70726f6265

// msSince is the time since start in milliseconds, rounded to the microsecond.
func msSince(start time.Time) float64 { return msOf(time.Since(start)) }

func msOf(d time.Duration) float64 { return roundMS(float64(d) / float64(time.Millisecond)) }

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

// cell is one planned probe: an exit and a target, by index.
type cell struct{ exit, target int }

// slot is one worker's probe in hand, and how far it got: at the deadline Run reads the slots of
// the probes still in flight, without waiting for them. A run has one slot per worker, not one
// per probe.
type slot struct {
	job     atomic.Int64 // the job in hand, plus one; 0 before the first
	phase   atomic.Int32
	start   atomic.Int64 // when the probe started, Unix nanoseconds; 0 if it has not
	status  atomic.Int32 // the response's status once its headers are in
	latency atomic.Int64 // the time to the headers, in nanoseconds
}

// begin makes job i the one in hand, nothing known about it yet.
func (s *slot) begin(i int) {
	s.phase.Store(int32(phaseQueued))
	s.start.Store(0)
	s.status.Store(0)
	s.latency.Store(0)
	s.job.Store(int64(i) + 1)
}

// finished is a worker's report of one job.
type finished struct {
	job int
	res Result
}

// Run probes every target through every exit and returns the report. It returns as soon as the
// deadline (Config.Deadline) passes, whatever the exits do: probes still in flight are abandoned
// and reported as cut ("deadline", or "canceled" when ctx ended first) in the phase they had
// reached, the probes never started as cut in phase "queued". It never returns nil.
//
// The work left after the deadline is bounded: Run aggregates the overall Stats as the probes
// finish, so what remains is one pass over the probes that did not finish (filling in their
// Results) and the overall verdict. The summaries per target and per exit are computed when the
// report is written (Report.WriteJSON) or asked for. Abandoned probes unwind on their own,
// closing their connections, moments after Run returns.
//
// Probes are sent in rounds: each round covers every exit once, in a shuffled (but fixed) order so
// that a block of hanging exits does not take every worker at once, and the targets evenly, so a
// deadline that cuts the run short leaves no exit or target unprobed while others were probed
// twice. Results are reported exit by exit, targets in the order given.
func (p *Prober) Run(ctx context.Context) *Report {
	started := time.Now()
	dctx, cancel := context.WithDeadlineCause(ctx, started.Add(p.cfg.Deadline), errDeadline)
	defer cancel()

	ne, nt := len(p.exits), len(p.targets)
	n := ne * nt
	order := rand.New(rand.NewPCG(planSeed, planSeed)).Perm(ne)
	// Job i is in round i/ne: exit order[i%ne] probes target (exit+round) mod nt.
	cellOf := func(i int) cell {
		e := order[i%ne]
		return cell{e, (e + i/ne) % nt}
	}
	index := func(c cell) int { return c.exit*nt + c.target }

	workers := min(p.cfg.Concurrency, n)
	slots := make([]slot, workers)
	out := make(chan finished, workers)
	feed := make(chan int)
	var wg sync.WaitGroup
	for w := range workers {
		s := &slots[w]
		wg.Go(func() {
			for i := range feed {
				if dctx.Err() != nil {
					continue // the feed closes soon; start nothing more
				}
				s.begin(i)
				f := finished{i, p.probe(dctx, s, cellOf(i))}
				select {
				case out <- f:
				case <-dctx.Done(): // Run has stopped listening: it records this probe as cut
				}
			}
		})
	}
	go func() {
		defer close(feed)
		for i := range n {
			select {
			case feed <- i:
			case <-dctx.Done():
				return
			}
		}
	}()

	results := make([]Result, n)
	recorded := make([]bool, n)
	overall := newAccumulator()
	done := 0
	record := func(k int, res Result) {
		results[k] = res
		recorded[k] = true
		overall.add(&results[k])
		done++
		if p.cfg.Progress != nil {
			p.cfg.Progress(done, n)
		}
	}
collect:
	for done < n {
		select {
		case f := <-out:
			record(index(cellOf(f.job)), f.res)
		case <-dctx.Done():
			// Keep what finished before the deadline, and no more: waiting for the probes in
			// flight to unwind would let a loaded machine stretch the deadline.
			for {
				select {
				case f := <-out:
					record(index(cellOf(f.job)), f.res)
					continue
				default:
				}
				break collect
			}
		}
	}

	if done == n {
		wg.Wait() // every worker has reported and is leaving: Run leaves nothing running
	} else {
		// The probes in flight are cancelled and unwind on their own, reporting to nobody: each
		// is recorded as cut in the last phase its slot shows. The rest never started.
		kind := cutKind(dctx)
		now := time.Now()
		for w := range slots {
			s := &slots[w]
			i := int(s.job.Load()) - 1
			if i < 0 {
				continue
			}
			c := cellOf(i)
			if k := index(c); !recorded[k] {
				res := p.newResult(c)
				res.ErrorKind, res.Phase = kind, phase(s.phase.Load()).String()
				if code := s.status.Load(); code > 0 {
					res.Status, res.LatencyMS = int(code), msOf(time.Duration(s.latency.Load()))
				} else if st := s.start.Load(); st > 0 {
					res.LatencyMS = msOf(now.Sub(time.Unix(0, st)))
				}
				res.Outcome, res.Class = cutVerdict()
				results[k], recorded[k] = res, true
				overall.add(&results[k])
			}
		}
		// One pass over the probes, filling in those never started; they count in the overall
		// Stats all at once.
		queued := 0
		outcome, class := cutVerdict()
		queuedPhase := phaseQueued.String()
		for k := range results {
			if recorded[k] {
				continue
			}
			t := &p.targets[k%nt]
			results[k] = Result{
				Exit: p.exits[k/nt].Label(), Target: t.shown, Origin: t.origin,
				Outcome: outcome, Class: class, ErrorKind: kind, Phase: queuedPhase,
			}
			queued++
		}
		overall.addCut(kind, queued)
	}

	rep := newReport(results, overall.stats(), p.policy, grid{exits: ne, targets: nt})
	rep.Started = started
	rep.ElapsedMS = msSince(started)
	rep.DeadlineMS = p.cfg.Deadline.Milliseconds()
	return rep
}

// planSeed seeds the shuffle of the exits.
const planSeed = 0x70726f6265

// msSince is the time since start in milliseconds, rounded to the microsecond.
func msSince(start time.Time) float64 { return msOf(time.Since(start)) }

func msOf(d time.Duration) float64 { return roundMS(float64(d) / float64(time.Millisecond)) }

package main

import (
	"context"
	"sync"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// history is what one breaker went through during the run.
type history struct {
	Trips    int             // moves to OPEN on transient failures (a failed probe included)
	Parks    int             // moves to OPEN parked by a permanent failure
	Reasons  map[string]int  // the failure class behind each trip or park
	Reheated int             // HALF_OPEN → CLOSED: a probe succeeded and traffic flowed again
	MaxLevel int             // the highest backoff level reached
	Waits    []time.Duration // how long each trip or park kept it OPEN, jitter included
	parked   bool            // the last transition parked the breaker
}

func (h *history) note(t breaker.Transition) {
	switch {
	case t.To == breaker.Open:
		if t.Parked {
			h.Parks++
		} else {
			h.Trips++
		}
		if h.Reasons == nil {
			h.Reasons = map[string]int{}
		}
		h.Reasons[t.Reason]++
		h.MaxLevel = max(h.MaxLevel, t.Level)
		h.Waits = append(h.Waits, t.NextProbe.Sub(t.At))
	case t.From == breaker.HalfOpen && t.To == breaker.Closed:
		h.Reheated++
	}
	h.parked = t.To == breaker.Open && t.Parked
}

// exitTally is what the transport reported about one exit.
type exitTally struct {
	Attempts int
	OK       map[string]int     // successful attempts by origin name
	Failed   map[pool.Class]int // unsuccessful attempts by verdict class
	Wide     history            // the exit's own breaker
}

type pairKey struct{ exit, origin string } // exit label, origin name

// reqRecord travels in a request's context, so the observer can tell the worker how the
// transport classified the attempt.
type reqRecord struct {
	attempted bool
	verdict   pool.Verdict
}

type reqKey struct{}

// recorder is the demo's transport.Observer and pool.Observer: it tallies attempts per exit, keeps
// the history of every breaker, and queues a line per state change for the display. Its methods
// are called concurrently from the request path, so they only count and format under a mutex.
type recorder struct {
	transport.NopObserver
	start     time.Time
	name      func(originKey string) string
	keepLines bool
	color     bool

	mu      sync.Mutex
	exits   map[string]*exitTally
	pairs   map[pairKey]*history
	origins map[string]*history // origin guards, by origin name
	pending []string            // state-change lines the display has not printed yet
}

var (
	_ transport.Observer = (*recorder)(nil)
	_ pool.Observer      = (*recorder)(nil) // so transport.New adds it to the pool
)

func newRecorder(start time.Time, name func(string) string, keepLines, color bool) *recorder {
	return &recorder{
		start: start, name: name, keepLines: keepLines, color: color,
		exits: map[string]*exitTally{}, pairs: map[pairKey]*history{}, origins: map[string]*history{},
	}
}

// exit returns the tally for label, creating it. The caller holds r.mu.
func (r *recorder) exit(label string) *exitTally {
	t := r.exits[label]
	if t == nil {
		t = &exitTally{OK: map[string]int{}, Failed: map[pool.Class]int{}}
		r.exits[label] = t
	}
	return t
}

// AttemptFinished counts the attempt against its exit and hands the verdict to the worker.
func (r *recorder) AttemptFinished(ctx context.Context, a transport.AttemptResult) {
	origin := r.name(a.Origin)
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.exit(a.Exit.Label())
	t.Attempts++
	if a.Verdict.Outcome == pool.Success {
		t.OK[origin]++
	} else {
		t.Failed[a.Verdict.Class]++
	}
	if rec, ok := ctx.Value(reqKey{}).(*reqRecord); ok {
		rec.attempted, rec.verdict = true, a.Verdict
	}
}

// StateChanged records the transition and queues its line.
func (r *recorder) StateChanged(c pool.StateChange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var h *history
	switch c.Scope {
	case pool.ScopePair:
		k := pairKey{c.Exit.Label(), r.name(c.Origin)}
		if h = r.pairs[k]; h == nil {
			h = &history{}
			r.pairs[k] = h
		}
	case pool.ScopeExit:
		h = &r.exit(c.Exit.Label()).Wide
	default:
		o := r.name(c.Origin)
		if h = r.origins[o]; h == nil {
			h = &history{}
			r.origins[o] = h
		}
	}
	if r.keepLines {
		r.pending = append(r.pending, describeChange(c, c.At.Sub(r.start), r.name, h.parked, r.color))
	}
	h.note(c.Transition)
}

// verdict returns what the observer learned about a request's attempt.
func (r *recorder) verdict(rec *reqRecord) (pool.Verdict, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return rec.verdict, rec.attempted
}

// takeLines returns the queued state-change lines and empties the queue.
func (r *recorder) takeLines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.pending
	r.pending = nil
	return l
}

// counts returns each exit's successful and failed attempts so far.
func (r *recorder) counts() map[string][2]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string][2]int, len(r.exits))
	for label, t := range r.exits {
		ok := 0
		for _, n := range t.OK {
			ok += n
		}
		failed := 0
		for _, n := range t.Failed {
			failed += n
		}
		m[label] = [2]int{ok, failed}
	}
	return m
}

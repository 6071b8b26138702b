package pool

import (
	"container/heap"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// An origin with many pairs out of CLOSED — thousands of exits banned or cooling down for one
// site — would make every pick that draws one of them look the pair up and lock its breaker, only
// to learn that it is still cooling down. The origin keeps instead a lower bound on when any of
// them may next admit a request (dueTable.min), and a pick that draws such a pair before then
// skips it without a lookup.
//
// The bound is kept from the pairs' own news, never by scanning them: each pair holds its due key,
// the instant before which it cannot admit a request — set at each transition (its NextProbe when
// it opens; when a probe goes out, the probe lease's end if that probe holds its only slot, else
// then), at a probe's return without a transition (then), and cleared when it closes — and the
// origin a min-heap of (key, pair) entries. An entry whose key is no longer its pair's is stale
// and dropped when it reaches the top; the bound is the top's key. A bound that has passed makes
// picks look pairs up again until the top's pair moves on.

// dueSwept is the due key of a pair the sweep has dropped: none of its entries is valid.
const dueSwept = -1

// dueTable is an origin's heap of due entries.
type dueTable struct {
	mu        sync.Mutex
	entries   dueHeap
	compacted int                  // entries kept by the last compaction
	cleaned   atomic.Int64         // when a passed bound was last looked at (Unix ns)
	top       atomic.Pointer[pair] // the top's pair, published with min (dueProbe)
	// min is the top's key; MaxInt64 when empty (nothing out of CLOSED). Last: in the origin's
	// state it shares a cache line with the fields after the table (originState).
	min atomic.Int64
}

type dueEntry struct {
	key int64
	pr  *pair
}

func (e dueEntry) valid() bool { return e.pr.due.Load() == e.key }

type dueHeap []dueEntry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].key < h[j].key }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueEntry)) }
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = dueEntry{}
	*h = old[:len(old)-1]
	return e
}

// dueClean bounds how often a passed bound is re-examined (on the pool's clock).
const dueClean = 10 * time.Millisecond

// set makes key pr's due key (0: CLOSED, nothing to wait for) and records it.
func (d *dueTable) set(pr *pair, key int64) {
	pr.due.Store(key)
	if key == 0 {
		return // its entries are stale now; they go when they reach the top
	}
	d.mu.Lock()
	heap.Push(&d.entries, dueEntry{key: key, pr: pr})
	if len(d.entries) >= 2*max(d.compacted, 32) {
		d.compactLocked()
	}
	d.dropStaleLocked()
	d.mu.Unlock()
}

// notBefore reports, from the bound, that no pair of the origin out of CLOSED admits a request
// before the instant it returns; ok is false when the bound has passed (some pair may be ready).
func (d *dueTable) notBefore(now time.Time) (until time.Time, ok bool) {
	n := now.UnixNano()
	if m := d.min.Load(); n < m {
		return time.Unix(0, m), true
	}
	// The bound has passed: its entry may be stale. Look, at most once per dueClean.
	last := d.cleaned.Load()
	if n-last < int64(dueClean) || !d.cleaned.CompareAndSwap(last, n) {
		return time.Time{}, false
	}
	d.mu.Lock()
	d.dropStaleLocked()
	d.mu.Unlock()
	if m := d.min.Load(); n < m {
		return time.Unix(0, m), true
	}
	return time.Time{}, false
}

// dropStaleLocked pops stale entries off the top and publishes the bound. d.mu is held.
func (d *dueTable) dropStaleLocked() {
	for len(d.entries) > 0 && !d.entries[0].valid() {
		heap.Pop(&d.entries)
	}
	if len(d.entries) == 0 {
		d.top.Store(nil)
		d.min.Store(math.MaxInt64)
		return
	}
	d.top.Store(d.entries[0].pr)
	d.min.Store(d.entries[0].key)
}

// compactLocked drops every stale entry, so that pairs that move often cannot grow the heap past
// twice the entries it kept last time (amortised: a compaction follows as many pushes as it
// visits entries). d.mu is held.
func (d *dueTable) compactLocked() {
	kept := d.entries[:0]
	for _, e := range d.entries {
		if e.valid() {
			kept = append(kept, e)
		}
	}
	clear(d.entries[len(kept):])
	d.entries = kept
	d.compacted = len(kept)
	heap.Init(&d.entries)
}

// noteDue records what transition t of pr says about when pr may next admit a request.
func (pr *pair) noteDue(t breaker.Transition) {
	d := &pr.origin.due
	switch t.To {
	case breaker.Closed:
		d.set(pr, 0)
	case breaker.Open:
		d.set(pr, max(t.NextProbe.UnixNano(), 1))
	case breaker.HalfOpen:
		// A probe has gone out. It holds the pair's only slot until its verdict (a transition, or
		// probeBack) or the end of its lease; with more slots, others may go out at once.
		key := t.At.UnixNano()
		if s := pr.b.Policy().Settings(); s.HalfOpenProbes == 1 {
			key += int64(s.ProbeLease)
		}
		d.set(pr, max(key, 1))
	}
}

// probeBack records that a probe of pr came back without a transition (it was released, or its
// verdict said nothing): the slot is free again at now.
func (pr *pair) probeBack(now time.Time) {
	if pr.due.Load() > now.UnixNano() {
		pr.origin.due.set(pr, max(now.UnixNano(), 1))
	}
}

// The same heap schedules probes. A pick draws its candidates at random, so a pair whose cooldown
// has ended waited for a draw to hit it: at 100 picks a second, half a second among 10 exits but
// seconds among 1,000 and minutes among 10,000 (TestDueProbeWaitFlatInExits). The pair at the
// top of the heap is the one whose probe is due first: a pick looks at it before it samples, and
// takes it when its probe is due and it may be sent now. Sending the probe moves the pair's key
// (noteDue), which brings the next due pair to the top — one due probe per pick, in due order,
// whatever the size of the pool. A pick finds the top with two atomic loads (the bound, then the
// pair); when nothing is due, with one.

// dueProbe returns the exit of set whose pair with o is the first due for a probe, if its probe
// is due at now, the exit is among those the pick may draw (view, avoid), and its breakers and
// buckets would admit it now; else nil. Only a pair of a tier at or below start (the tier the
// pick starts at, spill.go) goes first: a tier above it waits for traffic to reach it, as its
// exits do (escalating costs), while a tier below it — one the spillover passes by because
// none of its exits is healthy for o — must still be probed to come back. A tier whose budget is
// spent sends no probe (c keeps the budget for the refusal, budget.go).
// passed reports whether a pair's bound may have passed at (Unix ns): the pick asks, inlined,
// before it calls dueProbe.
func (d *dueTable) passed(at int64) bool { return at >= d.min.Load() }

func (p *Pool) dueProbe(now time.Time, o *originState, set *exitSet, view *wantView, start int, avoid *Retries, c *choice) (*exitState, uint32) {
	d := &o.due
	m := d.min.Load()
	if now.UnixNano() < m {
		return nil, 0 // nothing due (or nothing out of CLOSED: m is MaxInt64)
	}
	pr := d.top.Load()
	if pr == nil || pr.due.Load() != m {
		// The top moved on without a transition that cleans the heap (a pair closed): clean it,
		// at most once per dueClean, and look again.
		if _, ok := d.notBefore(now); ok {
			return nil, 0
		}
		if m, pr = d.min.Load(), d.top.Load(); now.UnixNano() < m || pr == nil || pr.due.Load() != m {
			return nil, 0
		}
	}
	pos, ok := set.where[pr.id]
	if !ok || pos.group > start {
		return nil, 0
	}
	g := &set.groups[pos.group]
	sub := view.group(pos.group, g)
	if !inSubset(sub, pos.index) || p.tierSpent(now, g, sub, c) {
		return nil, 0
	}
	if ok, _, _ := p.ready(now, o, g, pos.index, avoid); !ok {
		return nil, 0
	}
	return g.exits[pos.index], pr.id
}

// inSubset reports whether group index i is among the exits of sub (nil: the whole group). A
// subset's indexes are ascending.
func inSubset(sub *subset, i int) bool {
	if sub == nil {
		return true
	}
	_, ok := slices.BinarySearch(sub.idx, int32(i))
	return ok
}

package redisstore

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// ExitSource returns a ratelimit.Source that enforces l as the budget of the exit labelled label
// across the whole fleet: every member that shares the namespace draws from one GCRA bucket in
// Redis. Pass it as ratelimit.Limits.ExitSource; PerExit and Exits then describe fleet budgets.
//
// Members lease tokens in batches (Settings.LeaseBatch) ahead of need, from a goroutine of the
// store: the request path only counts leased tokens down (atomics; no round trip, no allocation).
// While Redis answers, the fleet leases at most l.Burst + T×l.Rate tokens in any span T (GCRA, on
// Redis's clock); requests sent in the span may add what members leased just before it — at most a
// batch each, which they drop if unused within LeaseTTL. While the store is degraded —
// and when a lease is late by more than LeaseWait, which makes it so — each member draws from a
// local bucket of FallbackShare × l instead, so requests keep flowing.
//
// A request refused for want of a token (ratelimit.Limits.FailFast) is one the budget could not
// serve: the fleet bucket was found empty, or while degraded the fallback bucket is. A request that
// finds no leased token while a lease is on its way — the first after the store turned healthy,
// after leased tokens expired, or when a batch was spent before its renewal came — waits for that
// lease instead, at most until it is late (LeaseWait), when the fallback serves it.
//
// The bucket runs on Redis's clock and real time: use it with the system clock.
func (st *Store) ExitSource(label string, l ratelimit.Limit) ratelimit.Source {
	if l.IsZero() || !(l.Rate > 0) || l.Rate == rate.Inf || l.Burst < 1 {
		return nil
	}
	em := max(int64(math.Ceil(1e6/float64(l.Rate))), 1) // rounded up: never faster than l.Rate
	batch := int64(st.s.LeaseBatch)
	if batch == 0 {
		batch = int64(math.Ceil(float64(l.Rate) / 10))
	}
	batch = min(max(batch, 1), int64(l.Burst))
	share := st.s.FallbackShare
	b := &fleetBucket{
		st: st, key: st.k.rate(label), shard: shardOfName(label), lim: l, emUS: em, batch: batch, low: batch / 2,
		fallback: rate.NewLimiter(l.Rate*rate.Limit(share), max(1, int(math.Round(float64(l.Burst)*share)))),
	}
	st.bucketsMu.Lock()
	st.buckets = append(st.buckets, b)
	st.bucketsMu.Unlock()
	return b
}

// fleetBucket is one exit's share of a fleet budget: tokens leased from Redis, counted down on
// the request path.
type fleetBucket struct {
	st         *Store
	key        string
	shard      int // the shard of key
	lim        ratelimit.Limit
	emUS       int64 // emission interval, µs
	batch, low int64 // lease up to batch tokens when at most low are left

	tokens   atomic.Int64
	queued   atomic.Bool  // waiting for the lease loop (in leaseWake, or until retryAt)
	asked    atomic.Int64 // when tokens were asked for and not yet answered (Unix ns); 0 if not
	retryAt  atomic.Int64 // the fleet bucket is empty until then (Unix ns); 0 if not
	leasedAt atomic.Int64 // when the tokens held were leased (Unix ns)
	fallback *rate.Limiter
}

var _ ratelimit.Source = (*fleetBucket)(nil)

// retryQuantum is the grid the lease loop's retries for empty fleet buckets are put on, in ns.
const retryQuantum = int64(10 * time.Millisecond)

// errLeaseLate: a lease took longer than LeaseWait.
var errLeaseLate = errors.New("redisstore: a rate-limit lease is late")

// Ready implements ratelimit.Source.
func (b *fleetBucket) Ready(now time.Time) (bool, time.Time) {
	if b.st.degraded.Load() {
		return b.fallbackReady(now)
	}
	n := b.tokens.Load()
	if n > 0 {
		if n <= b.low {
			b.wake(now)
		}
		return true, time.Time{}
	}
	b.wake(now)
	switch {
	case b.late(now):
		return b.fallbackReady(now)
	case b.coming(now):
		return true, time.Time{} // Take waits for the lease on its way
	}
	return false, b.nextTry(now)
}

// Take implements ratelimit.Source: a leased token; while degraded, or when the lease is late, a
// fallback token; with neither but a lease on its way, it waits for the lease (arrival.go).
func (b *fleetBucket) Take(now time.Time) bool {
	if !b.st.degraded.Load() && b.takeLeased(now) {
		return true // the common case: one compare-and-swap
	}
	return b.await(now)
}

// takeLeased takes one leased token, if one is there, and wakes the lease loop when the tokens
// left are few.
func (b *fleetBucket) takeLeased(now time.Time) bool {
	for {
		n := b.tokens.Load()
		if n <= 0 {
			return false
		}
		if b.tokens.CompareAndSwap(n, n-1) {
			if n-1 <= b.low {
				b.wake(now)
			}
			return true
		}
	}
}

// Return implements ratelimit.Source. A fallback token is not given back (it may be one the
// bucket never had): the cost is one token, once, and only while degraded.
func (b *fleetBucket) Return(time.Time) {
	if !b.st.degraded.Load() {
		b.tokens.Add(1)
	}
}

// Limit implements ratelimit.Source.
func (b *fleetBucket) Limit() rate.Limit { return b.lim.Rate }

// late reports whether tokens asked for have not come within LeaseWait (the lease loop is stuck on
// a Redis that does not answer); if so the store turns degraded, and the fallback serves until it
// re-syncs.
func (b *fleetBucket) late(now time.Time) bool {
	asked := b.asked.Load()
	if asked == 0 || now.UnixNano()-asked <= int64(b.st.s.LeaseWait) {
		return false
	}
	b.st.fail(errLeaseLate)
	return true
}

// nextTry is when a request that found no token should look again: just after the fleet bucket
// has one (the lease loop leases then), or, while a lease is on its way, after about two lease
// round trips.
func (b *fleetBucket) nextTry(now time.Time) time.Time {
	t, lw := now.UnixNano(), int64(b.st.leaseWait())
	if r := b.retryAt.Load(); r > t {
		return time.Unix(0, r+lw)
	}
	asked := b.asked.Load()
	if asked == 0 {
		return time.Unix(0, t+lw)
	}
	// Each wait as long as the tokens have been awaited so far (so a request that keeps looking
	// reaches the late instant within a few waits), and never past that instant.
	return time.Unix(0, min(t+max(lw, t-asked), asked+int64(b.st.s.LeaseWait)+1))
}

// leaseWait is twice the recent lease round trip, between 200 µs and LeaseWait/4.
func (st *Store) leaseWait() time.Duration {
	d := 2 * time.Duration(st.leaseRTT.Load())
	if d == 0 {
		d = time.Millisecond
	}
	return min(max(d, 200*time.Microsecond), max(st.s.LeaseWait/4, 200*time.Microsecond))
}

func (b *fleetBucket) fallbackReady(now time.Time) (bool, time.Time) {
	tokens := b.fallback.TokensAt(now)
	if tokens >= 1 {
		return true, time.Time{}
	}
	return false, now.Add(time.Duration((1 - tokens) / float64(b.fallback.Limit()) * float64(time.Second)))
}

func (b *fleetBucket) fallbackTake(now time.Time) bool {
	if b.fallback.AllowN(now, 1) {
		b.st.fallbacks.Add(1)
		return true
	}
	return false
}

// wake asks the lease loop for tokens at now, once until it has answered.
func (b *fleetBucket) wake(now time.Time) {
	if !b.queued.CompareAndSwap(false, true) {
		return
	}
	b.asked.CompareAndSwap(0, now.UnixNano())
	select {
	case b.st.leaseWake <- b:
	default:
		b.queued.Store(false) // the loop is swamped; the next look asks again
	}
}

// leaseLoop leases tokens for the buckets that ask, several exits per round trip; leases again
// for an exit whose fleet bucket was empty once it has a token; and drops tokens held past
// LeaseTTL.
func (st *Store) leaseLoop() {
	defer st.wg.Done()
	expire := time.NewTicker(max(st.s.LeaseTTL/2, time.Millisecond))
	defer expire.Stop()
	var waiting []*fleetBucket // fleet bucket empty: lease again at retryAt
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		var due []*fleetBucket
		select {
		case <-st.ctx.Done():
			return
		case b := <-st.leaseWake:
			due = append(due, b)
			for more := true; more; {
				select {
				case b := <-st.leaseWake:
					due = append(due, b)
				default:
					more = false
				}
			}
		case <-retry.C:
		case <-expire.C:
			st.expireLeases()
			continue
		}
		now := st.clock.Now().UnixNano()
		kept := waiting[:0]
		for _, b := range waiting {
			if b.retryAt.Load() <= now {
				due = append(due, b)
			} else {
				kept = append(kept, b)
			}
		}
		waiting = kept
		waiting = append(waiting, st.lease(due)...)
		if len(waiting) > 0 {
			soonest := waiting[0].retryAt.Load()
			for _, b := range waiting[1:] {
				soonest = min(soonest, b.retryAt.Load())
			}
			retry.Reset(time.Duration(max(soonest-st.clock.Now().UnixNano(), 0)))
		}
	}
}

// lease leases tokens for due in one pipeline and returns the buckets whose fleet bucket was
// empty (to try again at their retryAt). While degraded it leases nothing: the fallbacks serve.
func (st *Store) lease(due []*fleetBucket) (empty []*fleetBucket) {
	defer st.endLeaseRound()
	var asks []*fleetBucket
	for _, b := range due {
		if st.degraded.Load() || b.tokens.Load() > b.low {
			b.asked.Store(0)
			b.queued.Store(false)
			continue
		}
		asks = append(asks, b)
	}
	if len(asks) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(st.ctx, st.s.OpTimeout)
	defer cancel()
	start := st.clock.Now().UnixNano()
	for _, b := range asks {
		b.asked.CompareAndSwap(0, start) // a retry after an empty fleet bucket
	}
	cmds, err := st.pipelined(ctx, leaseScript, func(pipe goredis.Pipeliner, emit func(*goredis.Cmd)) {
		for _, b := range asks {
			want := max(b.batch-b.tokens.Load(), 1)
			emit(leaseScript.EvalSha(ctx, pipe, []string{b.key}, b.emUS, b.lim.Burst, want))
		}
	})
	st.leases.Add(1)
	now := st.clock.Now().UnixNano()
	if err == nil {
		// A moving average of the round trip, an eighth of each new sample.
		rtt := st.leaseRTT.Load()
		st.leaseRTT.Store(rtt + (now-start-rtt)/8)
	}
	for i, b := range asks {
		b.asked.Store(0)
		if i >= len(cmds) {
			b.queued.Store(false)
			continue
		}
		v, cerr := cmds[i].Int64Slice()
		if cerr != nil || len(v) != 2 {
			b.queued.Store(false)
			if cerr != nil && st.ctx.Err() == nil {
				st.failShard(b.shard, cerr)
			}
			continue
		}
		if v[0] > 0 {
			b.tokens.Add(v[0])
			b.leasedAt.Store(now)
			st.leased.Add(uint64(v[0]))
		}
		if v[1] <= 0 {
			b.retryAt.Store(0)
			b.queued.Store(false)
			continue
		}
		// The fleet bucket is empty: lease again once it holds half a batch, not at its first
		// token, so that a saturated fleet still leases in batches; and on a grid of
		// retryQuantum, so that exits that run dry together share the next round trip.
		at := now + (v[1]+(max(b.batch/2, 1)-1)*b.emUS)*int64(time.Microsecond)
		b.retryAt.Store((at + retryQuantum - 1) / retryQuantum * retryQuantum)
		empty = append(empty, b) // stays queued until the retry
	}
	if err != nil && len(cmds) == 0 && st.ctx.Err() == nil {
		st.fail(err)
	}
	return empty
}

// expireLeases drops tokens held longer than LeaseTTL.
func (st *Store) expireLeases() {
	cutoff := st.clock.Now().UnixNano() - int64(st.s.LeaseTTL)
	st.bucketsMu.Lock()
	defer st.bucketsMu.Unlock()
	for _, b := range st.buckets {
		if b.tokens.Load() > 0 && b.leasedAt.Load() < cutoff {
			b.tokens.Store(0)
		}
	}
}

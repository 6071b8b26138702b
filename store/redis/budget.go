package redisstore

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// BudgetSource returns a ratelimit.BudgetSource that keeps b, named name, across the whole fleet:
// every member that shares the namespace adds what it spends to one counter per period in Redis,
// and sees what the others spent. Pass it as pool.WithBudgetSource(st.BudgetSource); the pool
// names each tier budget (a fleet's members must give their tiers the same budgets).
//
// The request path touches no network: Charge adds to a count kept here and wakes the budget's
// goroutine, which adds it to the period's counter (INCRBY) in Redis and keeps the fleet's total
// that Redis answers; Left subtracts from the budget the fleet's total as last seen plus what
// this member charged since. The goroutine also reads the total every BudgetPoll, so a member
// that spends nothing still sees the others' spending. So the fleet stops within one attempt per
// member of the limit, plus the attempts that members admitted while the others' last charges
// were on their way to Redis (a round trip, or BudgetPoll for a member that charged nothing).
// While Redis does not answer, the charges wait here (they are added once it answers) and each
// member spends against the last total it saw.
//
// The counter of period n is "TAG:budget:NAME:n" on the shard of the budget's name, expiring one
// period after the period ends by the member's clock. Call BudgetSource before Close; after Close it returns a source
// that keeps the budget in this process only.
func (st *Store) BudgetSource(name string, b ratelimit.Budget) ratelimit.BudgetSource {
	if b.Validate() != nil {
		return nil
	}
	fb := &fleetBudget{st: st, name: name, b: b, shard: shardOfName(name), wake: make(chan struct{}, 1)}
	fb.period.Store(minPeriod)
	if st.ctx.Err() != nil {
		lb, _ := ratelimit.NewLocalBudget(b)
		return lb
	}
	st.wg.Add(1)
	go fb.loop()
	return fb
}

// BudgetPoll is how often a fleet budget's goroutine reads the fleet's total when this member
// charged nothing meanwhile.
const BudgetPoll = 100 * time.Millisecond

// minPeriod marks a budget that has counted no period yet.
const minPeriod = -1 << 63

// fleetBudget is this member's view of a budget the fleet shares.
type fleetBudget struct {
	st    *Store
	name  string
	b     ratelimit.Budget
	shard int

	mu      sync.Mutex   // serialises roll-overs and the goroutine's updates
	period  atomic.Int64 // the period fleet and pending count for
	fleet   atomic.Int64 // the fleet's total for period, as Redis last answered
	pending atomic.Int64 // charged here for period and not yet added in Redis
	// Charges to the period before, not yet added in Redis when the period rolled over (under mu).
	prevPeriod, prevPending int64
	wake                    chan struct{}
}

var _ ratelimit.BudgetSource = (*fleetBudget)(nil)

// Left implements ratelimit.BudgetSource.
func (fb *fleetBudget) Left(now time.Time) (int64, time.Time) {
	n, renews := fb.b.PeriodAt(now)
	if fb.period.Load() != n {
		return fb.b.Max, renews // not seen yet: the poll reads it within BudgetPoll
	}
	return fb.b.Max - fb.fleet.Load() - fb.pending.Load(), renews
}

// Charge implements ratelimit.BudgetSource.
func (fb *fleetBudget) Charge(at time.Time, n int64) {
	if n <= 0 {
		return
	}
	k, _ := fb.b.PeriodAt(at)
	if k == fb.period.Load() {
		fb.pending.Add(n)
	} else {
		fb.mu.Lock()
		switch cur := fb.roll(k); {
		case k == cur:
			fb.pending.Add(n)
		case k == fb.prevPeriod:
			fb.prevPending += n
		}
		fb.mu.Unlock()
	}
	select {
	case fb.wake <- struct{}{}:
	default:
	}
}

// roll moves the budget on to period k if k is later than its own, keeping what was charged to
// the period before, and returns the budget's period. Under mu.
func (fb *fleetBudget) roll(k int64) int64 {
	cur := fb.period.Load()
	if k <= cur {
		return cur
	}
	if p := fb.pending.Load(); p > 0 && cur == k-1 {
		fb.prevPeriod, fb.prevPending = cur, p
	}
	fb.fleet.Store(0)
	fb.pending.Store(0)
	fb.period.Store(k)
	return k
}

// Budget implements ratelimit.BudgetSource.
func (fb *fleetBudget) Budget() ratelimit.Budget { return fb.b }

// loop adds this member's charges to the fleet's counters and reads the fleet's totals, on each
// charge and every BudgetPoll, until the store closes.
func (fb *fleetBudget) loop() {
	defer fb.st.wg.Done()
	tick := time.NewTicker(BudgetPoll)
	defer tick.Stop()
	for {
		select {
		case <-fb.st.ctx.Done():
			return
		case <-fb.wake:
		case <-tick.C:
		}
		if err := fb.sync(); err != nil && fb.st.ctx.Err() == nil {
			fb.st.failShard(fb.shard, err)
		}
	}
}

// key is the Redis key of period n's counter.
func (fb *fleetBudget) key(n int64) string {
	return fb.st.k.shards[fb.shard].tag + ":budget:" + url.QueryEscape(fb.name) + ":" + strconv.FormatInt(n, 10)
}

// sync adds what was charged here to the fleet's counters, the period before first, and reads
// the current period's total.
func (fb *fleetBudget) sync() error {
	now, _ := fb.b.PeriodAt(fb.st.clock.Now())
	fb.mu.Lock()
	cur := fb.roll(now)
	prev, prevN := fb.prevPeriod, fb.prevPending
	fb.mu.Unlock()
	ctx, cancel := context.WithTimeout(fb.st.ctx, fb.st.s.OpTimeout)
	defer cancel()
	if prevN > 0 {
		if _, err := fb.add(ctx, prev, prevN); err != nil {
			return err
		}
		fb.mu.Lock()
		if fb.prevPeriod == prev {
			fb.prevPending -= prevN
		}
		fb.mu.Unlock()
	}
	n := fb.pending.Load()
	total, err := fb.add(ctx, cur, n)
	if err != nil {
		return err
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	switch {
	case fb.period.Load() == cur:
		fb.pending.Add(-n) // now in total
		if total > fb.fleet.Load() {
			fb.fleet.Store(total)
		}
	case fb.prevPeriod == cur:
		fb.prevPending = max(fb.prevPending-n, 0) // rolled over meanwhile, with n in prevPending
	}
	return nil
}

// add adds n to period k's counter (reads it, for n = 0) and returns the fleet's total.
func (fb *fleetBudget) add(ctx context.Context, k, n int64) (int64, error) {
	key := fb.key(k)
	if n == 0 {
		v, err := fb.st.c.Get(ctx, key).Int64()
		if errors.Is(err, goredis.Nil) {
			return 0, nil
		}
		return v, err
	}
	// Kept until a period after its period ends, by this member's clock (a TTL, not an instant:
	// Redis's clock need not be the pool's).
	_, end := fb.b.PeriodAt(time.Unix(0, k*int64(fb.b.Period)))
	ttl := max(end.Sub(fb.st.clock.Now()), 0) + fb.b.Period
	var incr *goredis.IntCmd
	_, err := fb.st.c.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
		incr = pipe.IncrBy(ctx, key, n)
		pipe.PExpire(ctx, key, ttl)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return incr.Val(), nil
}

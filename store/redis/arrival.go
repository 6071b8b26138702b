package redisstore

import "time"

// A request that finds no leased token while the store is healthy and the fleet bucket is not
// known to be empty has a lease on its way: the lease loop was woken and Redis will answer within
// a round trip, or within LeaseWait the lease is late and the fallback serves. Such a request is
// not refused, even by limits that fail fast: Ready reports the bucket ready, and Take waits for
// the lease round, at most until the lease is late. Refusing it would turn every lease renewal —
// the first take after leased tokens expired, after the store turned healthy, or after a batch
// was spent before its renewal came — into a lost request while the fleet's budget has tokens.

// coming reports whether tokens are on their way to b at now: the lease loop has b queued and the
// fleet bucket was not found empty until later (retryAt).
func (b *fleetBucket) coming(now time.Time) bool {
	return b.queued.Load() && b.retryAt.Load() <= now.UnixNano()
}

// await is Take when no leased token was there at first look: it takes a leased token, or a
// fallback token while degraded or when the lease is late, or waits for the lease round on its
// way and looks again. It gives up (false) when the fleet bucket is found empty, when the store
// closes, or when LeaseWait has passed and the tokens that came went to other requests.
func (b *fleetBucket) await(now time.Time) bool {
	st := b.st
	var timer *time.Timer // made only when there is a lease to wait for
	for expired := false; ; now = st.clock.Now() {
		round := st.leaseRound.Load() // before looking: a round that ends after the look closes it
		switch {
		case st.degraded.Load():
			return b.fallbackTake(now)
		case b.takeLeased(now):
			return true
		}
		b.wake(now)
		switch {
		case b.late(now):
			return b.fallbackTake(now)
		case expired || !b.coming(now):
			return false
		case timer == nil:
			// Past LeaseWait (and a margin) the lease is late, or came and went to others.
			timer = time.NewTimer(st.s.LeaseWait + time.Millisecond)
			defer timer.Stop()
		}
		select {
		case <-*round:
		case <-timer.C:
			expired = true
		case <-st.ctx.Done():
			return false
		}
	}
}

// endLeaseRound wakes the requests waiting for a lease round (await): the round has answered,
// failed, or found nothing to lease.
func (st *Store) endLeaseRound() {
	next := make(chan struct{})
	close(*st.leaseRound.Swap(&next))
}

package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/store"
)

// hold is this member's record of another member's probe claim: until the claim's lease ends (or
// the holder's verdict arrives), the key is treated as OPEN here, so that requests pick other
// exits instead of asking for a slot they cannot have.
type hold struct {
	id      string
	key     store.Key
	until   time.Time
	changed time.Time // the instant the hold was taken: its OPEN entry's Changed
}

// ClaimProbe claims, for the whole fleet, the HALF_OPEN probe the pool is about to send for t
// (pool.ProbeClaimer). It runs on the request path, only for a request that would be a probe:
//
//   - while the key's shard is out of step (the store is degraded) it returns true at once (the probe is this member's alone: during
//     an outage a fleet may send one probe per member);
//   - while another member's claim on t is known to hold, false at once, without a round trip;
//   - otherwise it makes one round trip (SET NX PX lease, in a script), bounded by ClaimTimeout.
//     Won: true. Held by another member: false, and the key is held OPEN here until that claim's
//     lease ends or the holder's verdict arrives. Timed out or failed: true, and the store turns
//     degraded.
//
// A probe's verdict releases its claim (the publish script deletes it), so the fleet's next probe
// of the key need not wait for the lease.
func (st *Store) ClaimProbe(now time.Time, t pool.ProbeTarget, lease time.Duration) bool {
	k := keyOfTarget(t)
	bid, shard := id(k), shardOf(k)
	if !st.groupOf[shard].inStep.Load() || st.ctx.Err() != nil {
		st.claims.Add(1)
		return true
	}
	st.holdMu.Lock()
	h := st.holds[bid]
	if h != nil && !now.Before(h.until) {
		delete(st.holds, bid)
		h = nil
	}
	st.holdMu.Unlock()
	if h != nil {
		st.claimsRefused.Add(1)
		return false
	}
	res, err := st.claim(shard, bid, lease)
	if err != nil {
		st.failShard(shard, err)
		st.claims.Add(1)
		return true
	}
	if res[0] == 1 {
		st.claims.Add(1)
		return true
	}
	st.claimsRefused.Add(1)
	remaining := time.Duration(res[1]) * time.Millisecond
	if remaining <= 0 {
		remaining = lease // no expiry reported: assume the holder's lease is as long as ours
	}
	h = &hold{id: bid, key: k, until: now.Add(remaining), changed: now}
	st.holdMu.Lock()
	defer st.holdMu.Unlock()
	st.holds[bid] = h
	if p := st.pool.Load(); p != nil {
		// At once, not from a goroutine: until the key reads OPEN, the picker may keep choosing it
		// (it looks ready, and idle) and burn its rounds on refusals. The caller holds no lock,
		// and the probe permit it holds goes stale, which is what it is about to release anyway.
		st.applyHold(p, h)
	}
	return false
}

// claim runs the claim script for bid on shard, and gives up waiting after ClaimTimeout whether or not the
// client honours contexts (go-redis does only with Options.ContextTimeoutEnabled): the call goes on
// in its own goroutine, which Close waits for.
func (st *Store) claim(shard int, bid string, lease time.Duration) ([]int64, error) {
	type result struct {
		res []int64
		err error
	}
	st.claimMu.Lock()
	if st.claimsClosed {
		st.claimMu.Unlock()
		return nil, errors.New("redisstore: closed")
	}
	st.claimWG.Add(1)
	st.claimMu.Unlock()
	done := make(chan result, 1)
	ctx, cancel := context.WithTimeout(st.ctx, st.s.ClaimTimeout)
	go func() {
		defer st.claimWG.Done()
		defer cancel()
		res, err := claimScript.Run(ctx, st.c, []string{st.k.claim(shard, bid)}, st.member, max(lease.Milliseconds(), 1)).Int64Slice()
		if err == nil && len(res) != 2 {
			err = fmt.Errorf("redisstore: claim script answered %v", res)
		}
		done <- result{res, err}
	}()
	timer := time.NewTimer(st.s.ClaimTimeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.res, r.err
	case <-timer.C:
		return nil, fmt.Errorf("redisstore: probe claim: no answer within %v", st.s.ClaimTimeout)
	}
}

// applyHold turns a hold into the pool's state: the key OPEN until the holder's lease ends, with
// the trip count and level this member knows. The caller holds holdMu.
func (st *Store) applyHold(p *pool.Pool, h *hold) {
	st.mirrorMu.Lock()
	m := st.mirror[h.key]
	st.mirrorMu.Unlock()
	p.Apply(st.clock.Now(), pool.SavedBreaker{
		Scope: h.key.Scope, Exit: h.key.Exit, Origin: h.key.Origin,
		Saved: breaker.Saved{
			State: breaker.Open, Parked: m.parked, Level: m.level, Trips: m.trips,
			LastFailure: m.lastFailure, NextProbe: h.until, Changed: h.changed,
		},
	})
}

package redisstore

import (
	"context"
	"errors"
	"net"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/store"
)

// syncLoop keeps the store in step with the fleet: it subscribes, re-syncs (reconcile), then
// applies other members' entries as they are published, PINGs the subscription every
// HealthInterval, and starts over — subscribe, re-sync — whenever anything fails.
func (st *Store) syncLoop() {
	defer st.wg.Done()
	announced := false // the degraded state last announced
	report := func() {
		if d := st.degraded.Load(); d != announced {
			announced = d
			st.announce()
		}
	}
	for st.ctx.Err() == nil {
		ps, err := st.subscribe()
		if err == nil {
			if err = st.reconcile(); err != nil {
				ps.Close()
			}
		}
		if err != nil {
			if st.ctx.Err() != nil {
				return
			}
			if !st.fail(err) {
				st.setErr(err)
			}
			report()
			if !st.sleep(st.s.HealthInterval) {
				return
			}
			continue
		}
		st.markHealthy()
		report()
		err = st.listen(ps)
		st.ps.Store(nil)
		ps.Close()
		if err != nil && st.ctx.Err() == nil {
			st.fail(err)
		}
		report()
	}
}

// setErr updates the reason of a store that is already degraded.
func (st *Store) setErr(err error) {
	st.healthMu.Lock()
	if st.health.Degraded {
		st.health.Err = err
	}
	st.healthMu.Unlock()
}

// sleep waits d, or until Close; it reports false on Close.
func (st *Store) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-st.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// subscribe subscribes to the namespace's channel and waits for the confirmation.
func (st *Store) subscribe() (*goredis.PubSub, error) {
	ctx, cancel := context.WithTimeout(st.ctx, st.s.OpTimeout)
	defer cancel()
	ps := st.c.Subscribe(ctx)
	st.ps.Store(ps)
	if st.ctx.Err() != nil {
		ps.Close()
		return nil, st.ctx.Err()
	}
	if err := ps.Subscribe(ctx, st.k.channel); err != nil {
		ps.Close()
		return nil, err
	}
	msg, err := ps.ReceiveTimeout(ctx, st.s.OpTimeout)
	if err != nil {
		ps.Close()
		return nil, err
	}
	if _, ok := msg.(*goredis.Subscription); !ok {
		ps.Close()
		return nil, errors.New("redisstore: subscribe: no confirmation")
	}
	return ps, nil
}

// errNoPong: the subscription stopped answering PINGs.
var errNoPong = errors.New("redisstore: subscription does not answer PING")

// listen applies the messages of ps until something fails (the error), the store turns degraded
// through another path (nil: re-sync), or Close (nil).
func (st *Store) listen(ps *goredis.PubSub) error {
	var pingAt time.Time // when the unanswered PING was sent; zero if none
	for {
		msg, err := ps.ReceiveTimeout(st.ctx, st.s.HealthInterval)
		if st.ctx.Err() != nil || st.degraded.Load() {
			return nil
		}
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return err
			}
			switch {
			case pingAt.IsZero():
				pctx, cancel := context.WithTimeout(st.ctx, st.s.OpTimeout)
				err := ps.Ping(pctx)
				cancel()
				if err != nil {
					return err
				}
				pingAt = time.Now()
			case time.Since(pingAt) > 2*st.s.HealthInterval:
				return errNoPong
			}
			continue
		}
		switch m := msg.(type) {
		case *goredis.Message:
			if p := st.pool.Load(); p != nil {
				st.receive(p, m.Payload)
			}
		case *goredis.Pong:
			pingAt = time.Time{}
		case *goredis.Subscription:
			if m.Kind == "subscribe" {
				// The client reconnected and subscribed again by itself: messages may have been
				// missed meanwhile. Re-sync.
				return errors.New("redisstore: subscription was re-established")
			}
		}
	}
}

// receive applies one published entry.
func (st *Store) receive(p *pool.Pool, payload string) {
	e, err := decode(payload)
	if err != nil {
		st.log.Warn("redisstore: ignoring a malformed entry", "namespace", st.s.Namespace, "err", err)
		return
	}
	st.applyEntry(p, e)
}

// applyEntry applies another member's entry to p, unless this member already has it (or a newer
// one). An entry for a key this member holds a claim hold on ends the hold: it is the holder's
// news, and wins over the hold whatever the clocks say.
func (st *Store) applyEntry(p *pool.Pool, e entry) {
	if e.Member == st.member {
		return
	}
	sb := e.SavedBreaker
	k := store.KeyOf(sb)
	bid := id(k)
	st.holdMu.Lock()
	defer st.holdMu.Unlock()
	if h := st.holds[bid]; h != nil {
		delete(st.holds, bid)
		if sb.Changed.Before(h.changed) {
			sb.Changed = h.changed
		}
	}
	st.mirrorMu.Lock()
	m, known := st.mirror[k]
	st.mirrorMu.Unlock()
	if known && !sb.Changed.After(m.changed) {
		return
	}
	if p.Apply(st.clock.Now(), sb) {
		st.applied.Add(1)
	}
	st.mirrorMu.Lock()
	st.mirror[k] = mirrorEntry{changed: sb.Changed, level: sb.Level, trips: sb.Trips, parked: sb.Parked, lastFailure: sb.LastFailure}
	st.mirrorMu.Unlock()
}

// reconcile brings this member and Redis in step: it pushes what this member knows (the records
// kept while degraded, and the pool's whole state), then pulls every live entry and applies the
// ones newer than this member's. Both directions keep the newer entry of a key, so running it
// twice, or on two members at once, changes nothing more.
func (st *Store) reconcile() error {
	ctx, cancel := context.WithTimeout(st.ctx, st.s.OpTimeout)
	defer cancel()
	p := st.pool.Load()
	batch := st.takePending()
	if p != nil {
		st.holdMu.Lock()
		held := make(map[string]bool, len(st.holds))
		for bid := range st.holds {
			held[bid] = true
		}
		st.holdMu.Unlock()
		for _, sb := range p.Save(st.clock.Now()).Breakers {
			k := store.KeyOf(sb)
			if held[id(k)] {
				continue // a placeholder for another member's probe: not this member's news
			}
			if old, ok := batch[k]; ok && old.sb.Changed.After(sb.Changed) {
				continue
			}
			batch[k] = pendingEntry{sb: sb, release: batch[k].release}
		}
	}
	if err := st.publish(ctx, values(batch)); err != nil {
		st.keep(batch)
		return err
	}
	if p != nil {
		if err := st.pull(ctx, p); err != nil {
			return err
		}
	}
	st.reconciles.Add(1)
	if q := st.pool.Load(); q != p {
		return st.reconcile() // bound meanwhile: pull into the pool too
	}
	return nil
}

// pull applies every live entry of the namespace to p.
func (st *Store) pull(ctx context.Context, p *pool.Pool) error {
	names, err := liveScript.Run(ctx, st.c, []string{st.k.index}).StringSlice()
	if err != nil {
		return err
	}
	const chunk = 256
	for len(names) > 0 {
		n := min(chunk, len(names))
		vals, err := st.c.MGet(ctx, names[:n]...).Result()
		if err != nil {
			return err
		}
		names = names[n:]
		for _, v := range vals {
			s, ok := v.(string)
			if !ok {
				continue // expired since the index was read
			}
			e, err := decode(s)
			if err != nil {
				st.log.Warn("redisstore: ignoring a malformed entry", "namespace", st.s.Namespace, "err", err)
				continue
			}
			st.applyEntry(p, e)
		}
	}
	return nil
}

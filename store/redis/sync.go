package redisstore

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/store"
)

// group is a set of shards read through one subscription, with a goroutine of its own (syncLoop):
// on a Redis Cluster one group per shard (SSUBSCRIBE takes the channels of one slot, and a
// failover moves a shard alone), on one server one group for all (one SUBSCRIBE of every channel).
type group struct {
	shards   []int
	channels []string
	// inStep: subscribed and re-synced, and nothing failed on its shards since. Cleared by any
	// failure on them (fail, failShard); the group's loop then re-subscribes and re-syncs.
	inStep atomic.Bool
	// pulled is the pool the group's shards were last pulled into.
	pulled atomic.Pointer[pool.Pool]
	ps     atomic.Pointer[goredis.PubSub] // the live subscription, closed by Close
}

// newGroups makes the store's groups for its client.
func newGroups(c goredis.UniversalClient, k keys) (groups []*group, sharded bool) {
	switch c.(type) {
	case *goredis.Client:
		g := &group{}
		for s := range Shards {
			g.shards = append(g.shards, s)
			g.channels = append(g.channels, k.shards[s].channel)
		}
		return []*group{g}, false
	case *goredis.ClusterClient:
		sharded = true
	}
	// A cluster (sharded pub/sub), or another client that spreads keys over servers by their
	// hash tags (a Ring): one subscription per shard, on the shard's server.
	for s := range Shards {
		groups = append(groups, &group{shards: []int{s}, channels: []string{k.shards[s].channel}})
	}
	return groups, sharded
}

// syncLoop keeps g's shards in step with the fleet: it subscribes, re-syncs (reconcile), then
// applies other members' entries as they are published, PINGs the subscription every
// HealthInterval, and starts over — subscribe, re-sync — whenever anything fails on its shards.
func (st *Store) syncLoop(g *group) {
	defer st.wg.Done()
	for st.ctx.Err() == nil {
		ps, err := st.subscribe(g)
		if err == nil {
			if err = st.reconcile(g); err != nil {
				ps.Close()
			}
		}
		if err != nil {
			if st.ctx.Err() != nil {
				return
			}
			st.failGroup(g, err)
			st.reloadSlots()
			st.report()
			if !st.sleep(st.s.HealthInterval) {
				return
			}
			continue
		}
		st.settle()
		err = st.listen(g, ps)
		g.ps.Store(nil)
		ps.Close()
		if st.ctx.Err() != nil {
			return
		}
		if err != nil {
			st.failGroup(g, err)
		}
		st.report()
	}
}

// reloadSlots asks a cluster client to reload its map of slots to masters (in the background): a
// failed master's replica takes its slots over, and go-redis would otherwise keep dialling the
// dead master until its next periodic reload (ClusterOptions.ClusterStateReloadInterval, 60 s by
// default) or a MOVED reply.
func (st *Store) reloadSlots() {
	if cc, ok := st.c.(*goredis.ClusterClient); ok {
		cc.ReloadState(st.ctx)
	}
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

// subscribe subscribes to g's channels and waits for every confirmation.
func (st *Store) subscribe(g *group) (*goredis.PubSub, error) {
	ctx, cancel := context.WithTimeout(st.ctx, st.s.OpTimeout)
	defer cancel()
	var ps *goredis.PubSub
	if cc, ok := st.c.(*goredis.ClusterClient); ok && st.sharded {
		ps = cc.SSubscribe(ctx)
	} else {
		ps = st.c.Subscribe(ctx)
	}
	g.ps.Store(ps)
	if st.ctx.Err() != nil {
		ps.Close()
		return nil, st.ctx.Err()
	}
	var err error
	if st.sharded {
		err = ps.SSubscribe(ctx, g.channels...)
	} else {
		err = ps.Subscribe(ctx, g.channels...)
	}
	if err != nil {
		ps.Close()
		return nil, err
	}
	for confirmed := 0; confirmed < len(g.channels); {
		msg, err := ps.ReceiveTimeout(ctx, st.s.OpTimeout)
		if err != nil {
			ps.Close()
			return nil, err
		}
		if _, ok := msg.(*goredis.Subscription); !ok {
			ps.Close()
			return nil, errors.New("redisstore: subscribe: no confirmation")
		}
		confirmed++
	}
	return ps, nil
}

// errNoPong: the subscription stopped answering PINGs.
var errNoPong = errors.New("redisstore: subscription does not answer PING")

// listen applies the messages of ps until something fails (the error), g falls out of step
// through another path (nil: re-sync), or Close (nil).
func (st *Store) listen(g *group, ps *goredis.PubSub) error {
	var pingAt time.Time // when the unanswered PING was sent; zero if none
	for {
		msg, err := ps.ReceiveTimeout(st.ctx, st.s.HealthInterval)
		if st.ctx.Err() != nil || !g.inStep.Load() {
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
			// "subscribe": the client reconnected and subscribed again by itself, and messages
			// may have been missed meanwhile; "sunsubscribe": the shard's slot moved (a failover,
			// a resharding). Either way: subscribe again and re-sync.
			return errors.New("redisstore: subscription was re-established or moved (" + m.Kind + ")")
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
	st.mirror[k] = mirrorEntry{changed: sb.Changed, level: sb.Level, trips: sb.Trips, parked: sb.Parked,
		lastFailure: sb.LastFailure, theirs: true}
	st.mirrorMu.Unlock()
}

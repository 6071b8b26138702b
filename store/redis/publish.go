package redisstore

import (
	"context"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/store"
)

// maxBatch bounds how many transitions one publish pipeline carries.
const maxBatch = 512

// pendingEntry is a record waiting to be published; release asks the script to free this member's
// probe claim on the key (the transition ended a probe).
type pendingEntry struct {
	sb      pool.SavedBreaker
	release bool
}

// mirrorEntry is what this member last knew of a key: the instant of the entry it applied or
// wrote (to skip entries it already has) and the facts a hold needs.
type mirrorEntry struct {
	changed     time.Time
	level       int
	trips       uint32
	parked      bool
	lastFailure string
}

// publishLoop takes transitions off the queue, keeps the mirror, and publishes the records worth
// sharing in one pipeline per batch. While degraded it keeps them for the next re-sync.
func (st *Store) publishLoop() {
	defer st.wg.Done()
	prune := time.NewTicker(pruneEvery)
	defer prune.Stop()
	for {
		select {
		case <-prune.C:
			st.prune(st.clock.Now())
		case <-st.ctx.Done():
			batch := map[store.Key]pendingEntry{}
			st.collect(batch, nil)
			if len(batch) > 0 && !st.degraded.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), st.s.OpTimeout)
				st.publish(ctx, values(batch))
				cancel()
			}
			return
		case c := <-st.q:
			batch := map[store.Key]pendingEntry{}
			st.collect(batch, &c)
			st.publishBatch(batch)
		}
	}
}

// pruneEvery is how often the mirror and the holds are pruned; mirrorKeep is how long a mirror
// entry is kept after its last change.
const (
	pruneEvery = time.Hour
	mirrorKeep = 24 * time.Hour
)

// prune forgets mirror entries unchanged for mirrorKeep and holds whose lease has ended, so that
// neither grows with every key ever seen.
func (st *Store) prune(now time.Time) {
	st.holdMu.Lock()
	for bid, h := range st.holds {
		if !now.Before(h.until) {
			delete(st.holds, bid)
		}
	}
	st.holdMu.Unlock()
	st.mirrorMu.Lock()
	for k, m := range st.mirror {
		if now.Sub(m.changed) > mirrorKeep {
			delete(st.mirror, k)
		}
	}
	st.mirrorMu.Unlock()
}

// collect adds first (if not nil) and whatever else is queued, up to maxBatch, to batch.
func (st *Store) collect(batch map[store.Key]pendingEntry, first *pool.StateChange) {
	if first != nil {
		st.note(batch, *first)
	}
	for len(batch) < maxBatch {
		select {
		case c := <-st.q:
			st.note(batch, c)
		default:
			return
		}
	}
}

// note updates the mirror with one of this pool's transitions and adds its record to batch.
func (st *Store) note(batch map[store.Key]pendingEntry, c pool.StateChange) {
	k := store.Key{Scope: c.Scope, Origin: c.Origin}
	if c.Exit != nil {
		k.Exit = c.Exit.Label()
	}
	st.mirrorMu.Lock()
	m := st.mirror[k]
	m.level, m.trips, m.parked = c.Level, c.Trips, c.Parked
	if c.Reason != "" {
		m.lastFailure = c.Reason
	}
	rec, ok := store.Record(c)
	if ok {
		m.changed = rec.Changed
	}
	st.mirror[k] = m
	st.mirrorMu.Unlock()
	if !ok {
		return
	}
	pe := pendingEntry{sb: rec, release: c.From == breaker.HalfOpen}
	if old, had := batch[k]; had {
		if old.sb.Changed.After(rec.Changed) {
			return
		}
		pe.release = pe.release || old.release
	}
	batch[k] = pe
}

func values(m map[store.Key]pendingEntry) []pendingEntry {
	out := make([]pendingEntry, 0, len(m))
	for _, pe := range m {
		out = append(out, pe)
	}
	return out
}

// publishBatch publishes batch, or keeps it for the re-sync when Redis is not answering.
func (st *Store) publishBatch(batch map[store.Key]pendingEntry) {
	if len(batch) == 0 {
		return
	}
	if !st.degraded.Load() {
		ctx, cancel := context.WithTimeout(st.ctx, st.s.OpTimeout)
		err := st.publish(ctx, values(batch))
		cancel()
		if err == nil {
			return
		}
		st.fail(err)
	}
	st.keep(batch)
}

// keep merges entries into the pending set, newest per key.
func (st *Store) keep(batch map[store.Key]pendingEntry) {
	st.pendMu.Lock()
	defer st.pendMu.Unlock()
	for k, pe := range batch {
		if old, ok := st.pending[k]; ok && old.sb.Changed.After(pe.sb.Changed) {
			continue
		}
		st.pending[k] = pe
	}
}

// takePending empties the pending set and returns it.
func (st *Store) takePending() map[store.Key]pendingEntry {
	st.pendMu.Lock()
	defer st.pendMu.Unlock()
	out := st.pending
	st.pending = map[store.Key]pendingEntry{}
	return out
}

// publish stores and publishes entries in one pipeline (the script keeps the newer entry of a
// key). It reloads the script once if Redis lost it (a restarted server).
func (st *Store) publish(ctx context.Context, entries []pendingEntry) error {
	if len(entries) == 0 {
		return nil
	}
	now := st.clock.Now()
	run := func() ([]*goredis.Cmd, error) {
		pipe := st.c.Pipeline()
		cmds := make([]*goredis.Cmd, 0, len(entries))
		for _, pe := range entries {
			value, err := encode(st.member, pe.sb)
			if err != nil {
				continue
			}
			bid := id(store.KeyOf(pe.sb))
			release := "0"
			if pe.release {
				release = "1"
			}
			cmds = append(cmds, publishScript.EvalSha(ctx, pipe,
				[]string{st.k.state(bid), st.k.index, st.k.claim(bid)},
				value, st.ttl(pe.sb, now).Milliseconds(), st.k.channel, st.member, release))
		}
		_, err := pipe.Exec(ctx)
		return cmds, err
	}
	cmds, err := run()
	if isNoScript(err) {
		if err := publishScript.Load(ctx, st.c).Err(); err != nil {
			return err
		}
		cmds, err = run()
	}
	if err != nil {
		return err
	}
	for _, c := range cmds {
		if n, _ := c.Int64(); n == 1 {
			st.published.Add(1)
		}
	}
	return nil
}

func isNoScript(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") }

// ttl is how long a key for sb lives from now: its remaining window, then Linger.
func (st *Store) ttl(sb pool.SavedBreaker, now time.Time) time.Duration {
	d := st.s.Linger
	if sb.State == breaker.Open {
		d += max(sb.NextProbe.Sub(now), 0)
	}
	return min(max(d, time.Millisecond), maxTTL)
}

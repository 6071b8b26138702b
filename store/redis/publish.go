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
	theirs      bool // the entry was another member's
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
	m.level, m.trips, m.parked, m.theirs = c.Level, c.Trips, c.Parked, false
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

// publishBatch publishes batch, keeping for the re-sync what Redis did not acknowledge and what
// belongs to shards out of step (their re-sync pushes it).
func (st *Store) publishBatch(batch map[store.Key]pendingEntry) {
	var now, later []pendingEntry
	for k, pe := range batch {
		if st.groupOf[shardOf(k)].inStep.Load() {
			now = append(now, pe)
		} else {
			later = append(later, pe)
		}
	}
	if len(now) > 0 {
		ctx, cancel := context.WithTimeout(st.ctx, st.s.OpTimeout)
		failed, _ := st.publish(ctx, now)
		cancel()
		later = append(later, failed...)
	}
	st.keepList(later)
}

// keepList merges entries into the pending set, newest per key.
func (st *Store) keepList(entries []pendingEntry) {
	if len(entries) == 0 {
		return
	}
	st.pendMu.Lock()
	defer st.pendMu.Unlock()
	for _, pe := range entries {
		k := store.KeyOf(pe.sb)
		if old, ok := st.pending[k]; ok && old.sb.Changed.After(pe.sb.Changed) {
			continue
		}
		st.pending[k] = pe
	}
}

// takePending removes from the pending set the entries of the shards in, and returns them.
func (st *Store) takePending(in map[int]bool) map[store.Key]pendingEntry {
	st.pendMu.Lock()
	defer st.pendMu.Unlock()
	out := map[store.Key]pendingEntry{}
	for k, pe := range st.pending {
		if in[shardOf(k)] {
			out[k] = pe
			delete(st.pending, k)
		}
	}
	return out
}

// RepushWindow is how long after Redis acknowledged an entry the member keeps it to push again at
// a re-sync. A replica takes over a failed master with what it had received, and Redis replicates
// asynchronously: the master's last acknowledged writes — milliseconds' worth on a healthy link —
// may never have reached it. So a re-sync pushes, besides what was never acknowledged, what was
// acknowledged within RepushWindow; nothing acknowledged earlier is lost in a failover as long as
// the replicas lag by less.
const RepushWindow = 5 * time.Second

// sentEntry is an acknowledged entry and when Redis acknowledged it (real time).
type sentEntry struct {
	pe pendingEntry
	at time.Time
}

// remember records acknowledged entries for RepushWindow, and forgets older ones.
func (st *Store) remember(entries []pendingEntry, at time.Time) {
	st.sentMu.Lock()
	defer st.sentMu.Unlock()
	for _, pe := range entries {
		pe.release = false // a probe's claim is released once
		st.sent[store.KeyOf(pe.sb)] = sentEntry{pe: pe, at: at}
	}
	if len(st.sent) > 2*st.sentPruned {
		for k, se := range st.sent {
			if at.Sub(se.at) > RepushWindow {
				delete(st.sent, k)
			}
		}
		st.sentPruned = max(len(st.sent), 64)
	}
}

// recent returns the entries of the shards in that Redis acknowledged within RepushWindow.
func (st *Store) recent(in map[int]bool) map[store.Key]pendingEntry {
	now := time.Now()
	st.sentMu.Lock()
	defer st.sentMu.Unlock()
	out := map[store.Key]pendingEntry{}
	for k, se := range st.sent {
		switch {
		case now.Sub(se.at) > RepushWindow:
			delete(st.sent, k)
		case in[shardOf(k)]:
			out[k] = se.pe
		}
	}
	return out
}

// publish stores and publishes entries in one pipeline (the script keeps the newer entry of a
// key). It returns the entries Redis did not acknowledge, and the first error; the shards those
// belong to fall out of step.
func (st *Store) publish(ctx context.Context, entries []pendingEntry) (failed []pendingEntry, err error) {
	if len(entries) == 0 {
		return nil, nil
	}
	now := st.clock.Now()
	mode := "p"
	if st.sharded {
		mode = "s"
	}
	sent := make([]pendingEntry, 0, len(entries))
	cmds, err := st.pipelined(ctx, publishScript, func(pipe goredis.Pipeliner, emit func(*goredis.Cmd)) {
		sent = sent[:0]
		for _, pe := range entries {
			value, err := encode(st.member, pe.sb)
			if err != nil {
				continue
			}
			k := store.KeyOf(pe.sb)
			s, bid := shardOf(k), id(k)
			release := "0"
			if pe.release {
				release = "1"
			}
			sent = append(sent, pe)
			emit(publishScript.EvalSha(ctx, pipe,
				[]string{st.k.state(s, bid), st.k.shards[s].index, st.k.claim(s, bid)},
				value, st.ttl(pe.sb, now).Milliseconds(), st.k.shards[s].channel, st.member, release, mode))
		}
	})
	acked := make([]pendingEntry, 0, len(sent))
	for i, c := range cmds {
		n, cerr := c.Int64()
		switch {
		case cerr != nil:
			failed = append(failed, sent[i])
			st.failShard(shardOf(store.KeyOf(sent[i].sb)), cerr)
		case n == 1:
			st.published.Add(1)
			acked = append(acked, sent[i])
		}
	}
	if err != nil && len(cmds) == 0 {
		failed = sent
		st.fail(err)
	}
	st.remember(acked, time.Now())
	return failed, err
}

// pipelined runs the commands build emits in one pipeline. If Redis lost script (a server
// restarted, a replica promoted), it loads it and runs them again, once.
func (st *Store) pipelined(ctx context.Context, script *goredis.Script, build func(pipe goredis.Pipeliner, emit func(*goredis.Cmd))) ([]*goredis.Cmd, error) {
	run := func() ([]*goredis.Cmd, error) {
		pipe := st.c.Pipeline()
		var cmds []*goredis.Cmd
		build(pipe, func(c *goredis.Cmd) { cmds = append(cmds, c) })
		if len(cmds) == 0 {
			return nil, nil
		}
		_, err := pipe.Exec(ctx)
		return cmds, err
	}
	cmds, err := run()
	if hasNoScript(cmds, err) {
		if err := script.Load(ctx, st.c).Err(); err != nil {
			return nil, err
		}
		cmds, err = run()
	}
	return cmds, err
}

// hasNoScript reports whether Redis answered NOSCRIPT to any of cmds.
func hasNoScript(cmds []*goredis.Cmd, err error) bool {
	if isNoScript(err) {
		return true
	}
	for _, c := range cmds {
		if isNoScript(c.Err()) {
			return true
		}
	}
	return false
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

package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/store"
)

// ErrLegacyLayout is what Health reports, and the store logs, while a namespace still holds keys
// of the one-slot layout of earlier versions ("{pb:NAMESPACE}:…"): the store refuses to share it
// and runs on local state, as in an outage. Stop the members of the earlier version, then delete
// their keys — or give the new fleet another Namespace — as docs/fleet.md describes (Migration).
var ErrLegacyLayout = errors.New("redisstore: namespace holds keys of the one-slot layout of earlier versions " +
	"({pb:NAMESPACE}:…): stop those members and delete their keys, or use another Namespace (docs/fleet.md, Migration)")

// pageSize is how many state keys one page of a pull reads (a ZSCAN COUNT, then one MGET).
const pageSize = 256

// reconcile brings g's shards and Redis in step: it pulls every live entry of the shards into the
// bound pool (each page bounded by OpTimeout on its own, so a large pull under load is never
// restarted), then pushes what this member wrote and Redis may not hold: the records kept while
// degraded, what it published within RepushWindow (a failover may have lost those), and, for a
// shard Redis lost (its run id changed), after the queue dropped transitions or at the first sync
// with a pool (a warm start's state), the pool's whole state there but what it learned from others. Both directions keep the newer entry of a key, so
// running it twice, or on every member at once, changes nothing more — and a fleet-wide re-sync
// costs each entry one push by the member that wrote it and one read per member.
func (st *Store) reconcile(g *group) error {
	if err := st.checkLayout(); err != nil {
		return err
	}
	for {
		st.syncMu.Lock()
		p := st.pool.Load()
		st.syncMu.Unlock()
		first := p != nil && g.pulled.Load() != p
		lost, err := st.pull(p, g.shards)
		if err != nil {
			return err
		}
		if err := st.push(p, g.shards, lost, first); err != nil {
			return err
		}
		st.reconciles.Add(1)
		st.syncMu.Lock()
		if st.pool.Load() == p { // else bound meanwhile: pull into the pool too
			g.pulled.Store(p)
			g.inStep.Store(true)
			st.syncMu.Unlock()
			return nil
		}
		st.syncMu.Unlock()
	}
}

// checkLayout returns ErrLegacyLayout if the namespace holds the one-slot layout's index.
func (st *Store) checkLayout() error {
	ctx, cancel := context.WithTimeout(st.ctx, st.s.OpTimeout)
	defer cancel()
	n, err := st.c.Exists(ctx, st.k.legacyIndex()).Result()
	if err != nil {
		return err
	}
	if n > 0 {
		return ErrLegacyLayout
	}
	return nil
}

// pull applies every live entry of shards to p (nil: it only reads the shards' run ids), page by
// page, and returns the shards whose run id changed since this member last read it.
func (st *Store) pull(p *pool.Pool, shards []int) (lost map[int]bool, err error) {
	start := time.Now()
	count := pageSize
	if p == nil {
		count = 0
	}
	cursors := make(map[int]string, len(shards))
	for _, s := range shards {
		cursors[s] = "0"
	}
	first := true
	for len(cursors) > 0 {
		names, next, runs, err := st.page(cursors, count)
		if err != nil {
			return lost, err
		}
		if first {
			lost = st.noteRuns(runs)
			first = false
		}
		if err := st.fetch(p, names); err != nil {
			return lost, err
		}
		cursors = next
	}
	if p != nil {
		st.lastPull.Store(int64(time.Since(start)))
	}
	return lost, nil
}

// page reads one page of each shard in cursors, in one pipeline bounded by OpTimeout, and returns
// the state keys by shard, the cursors of the shards with more pages, and the shards' run ids.
func (st *Store) page(cursors map[int]string, count int) (names map[int][]string, next map[int]string, runs map[int]string, err error) {
	ctx, cancel := context.WithTimeout(st.ctx, st.s.OpTimeout)
	defer cancel()
	var b [8]byte
	rand.Read(b[:])
	newRun := hex.EncodeToString(b[:])
	cmds, err := st.pipelined(ctx, pageScript, func(pipe goredis.Pipeliner, emit func(*goredis.Cmd)) {
		for s, cur := range cursors {
			sk := st.k.shards[s]
			emit(pageScript.EvalSha(ctx, pipe, []string{sk.index, sk.run}, cur, count, newRun, maxTTL.Milliseconds()))
		}
	})
	if err != nil {
		return nil, nil, nil, err
	}
	names, next, runs = map[int][]string{}, map[int]string{}, map[int]string{}
	i := 0
	for s := range cursors { // the same order as above: a map is not re-ordered between reads
		v, err := cmds[i].StringSlice()
		i++
		if err != nil || len(v) < 2 {
			return nil, nil, nil, fmt.Errorf("redisstore: pull: shard %d: %v %w", s, v, err)
		}
		runs[s] = v[0]
		if v[1] != "0" {
			next[s] = v[1]
		}
		names[s] = v[2:]
	}
	return names, next, runs, nil
}

// fetch reads the entries named, one MGET per shard in one pipeline, and applies them to p.
func (st *Store) fetch(p *pool.Pool, names map[int][]string) error {
	if p == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(st.ctx, st.s.OpTimeout)
	defer cancel()
	pipe := st.c.Pipeline()
	var cmds []*goredis.SliceCmd
	for _, ns := range names {
		if len(ns) > 0 {
			cmds = append(cmds, pipe.MGet(ctx, ns...))
		}
	}
	if len(cmds) == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	for _, c := range cmds {
		for _, v := range c.Val() {
			s, ok := v.(string)
			if !ok {
				continue // expired since the index was read
			}
			e, err := decode(s)
			if err != nil {
				st.log.Warn("redisstore: ignoring a malformed entry", "namespace", st.s.Namespace, "err", err)
				continue
			}
			st.pulledEntries.Add(1)
			st.applyEntry(p, e)
		}
	}
	return nil
}

// noteRuns records the shards' run ids and returns the shards whose id changed since the last.
func (st *Store) noteRuns(runs map[int]string) map[int]bool {
	st.runMu.Lock()
	defer st.runMu.Unlock()
	lost := map[int]bool{}
	for s, r := range runs {
		if st.runs[s] != "" && st.runs[s] != r {
			lost[s] = true
		}
		st.runs[s] = r
	}
	return lost
}

// push publishes what this member wrote on shards and Redis may not hold (see reconcile), in
// batches of maxBatch, each bounded by OpTimeout. What is not acknowledged is kept for the next
// re-sync.
func (st *Store) push(p *pool.Pool, shards []int, lost map[int]bool, all bool) error {
	in := make(map[int]bool, len(shards))
	for _, s := range shards {
		in[s] = true
	}
	batch := st.takePending(in)
	for k, pe := range st.recent(in) {
		if old, ok := batch[k]; !ok || pe.sb.Changed.After(old.sb.Changed) {
			batch[k] = pe
		}
	}
	full := st.fullPush.Swap(false)
	if p != nil && (all || full || len(lost) > 0) {
		st.addOwnState(p, batch, func(s int) bool { return in[s] && (all || full || lost[s]) })
	}
	entries := values(batch)
	for len(entries) > 0 {
		n := min(len(entries), maxBatch)
		ctx, cancel := context.WithTimeout(st.ctx, st.s.OpTimeout)
		failed, err := st.publish(ctx, entries[:n])
		cancel()
		if err != nil {
			for _, pe := range entries[n:] {
				failed = append(failed, pe)
			}
			st.keepList(failed)
			if full {
				st.fullPush.Store(true)
			}
			return err
		}
		entries = entries[n:]
	}
	return nil
}

// addOwnState adds to batch the pool's breakers on the shards want accepts, but those this
// member learned from others or holds for another member's probe.
func (st *Store) addOwnState(p *pool.Pool, batch map[store.Key]pendingEntry, want func(shard int) bool) {
	st.holdMu.Lock()
	held := make(map[string]bool, len(st.holds))
	for bid := range st.holds {
		held[bid] = true
	}
	st.holdMu.Unlock()
	for _, sb := range p.Save(st.clock.Now()).Breakers {
		k := store.KeyOf(sb)
		if !want(shardOf(k)) || held[id(k)] {
			continue
		}
		st.mirrorMu.Lock()
		m, known := st.mirror[k]
		st.mirrorMu.Unlock()
		if known && m.theirs && !sb.Changed.After(m.changed) {
			continue // another member's news: it pushes it itself
		}
		if old, ok := batch[k]; ok && old.sb.Changed.After(sb.Changed) {
			continue
		}
		batch[k] = pendingEntry{sb: sb, release: batch[k].release}
	}
}

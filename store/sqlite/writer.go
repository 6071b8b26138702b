package sqlitestore

import (
	"context"
	"database/sql"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/store"
)

// maxBatch is how many distinct keys a batch may hold before it is committed without waiting for
// the flush interval.
const maxBatch = 1024

const upsert = `INSERT INTO breakers (scope, exit_label, origin, state, parked, level, trips,
	next_probe, closed_at, last_failure, changed)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (scope, exit_label, origin) DO UPDATE SET
	state = excluded.state, parked = excluded.parked, level = excluded.level, trips = excluded.trips,
	next_probe = excluded.next_probe, closed_at = excluded.closed_at,
	last_failure = excluded.last_failure, changed = excluded.changed
WHERE excluded.changed >= breakers.changed`

// batch is the transitions waiting for a commit, the newest per key.
type batch map[store.Key]pool.SavedBreaker

func (b batch) add(sb pool.SavedBreaker) {
	k := store.KeyOf(sb)
	if old, ok := b[k]; ok && old.Changed.After(sb.Changed) {
		return
	}
	b[k] = sb
}

// run is the writer: it collects transitions and commits them at most FlushInterval after the
// first of a batch (sooner when the batch is large, or Flush asks), and once more at Close.
func (st *Store) run() {
	defer close(st.done)
	pending := batch{}
	var timer *time.Timer
	var timerC <-chan time.Time
	arm := func() {
		if timer == nil {
			timer = time.NewTimer(st.s.FlushInterval)
			timerC = timer.C
		}
	}
	disarm := func() {
		if timer != nil {
			timer.Stop()
			timer, timerC = nil, nil
		}
	}
	drain := func() {
		for {
			select {
			case sb := <-st.q:
				pending.add(sb)
			default:
				return
			}
		}
	}
	flush := func(final bool) error {
		disarm()
		err := st.flush(pending, final)
		if err != nil {
			arm() // keep the batch; try again after another interval
		}
		return err
	}
	for {
		select {
		case sb := <-st.q:
			pending.add(sb)
			arm()
			if len(pending) >= maxBatch {
				flush(false)
			}
		case <-timerC:
			timer, timerC = nil, nil
			drain()
			flush(false)
		case reply := <-st.flushReq:
			drain()
			reply <- flush(false)
		case <-st.stop:
			drain()
			if err := flush(true); err != nil {
				st.closeErr = err
			}
			disarm()
			return
		}
	}
}

// flush commits pending in one transaction and empties it; on error it keeps pending. After a queue
// overflow, or when final, it first adds a full snapshot of the bound pool.
// Each flush, even one with nothing to write, first checks that the file is still there and
// writable (checkFile): a file removed from under the Store takes commits without an error.
func (st *Store) flush(pending batch, final bool) error {
	if err := checkFile(st.path, st.lock.file); err != nil {
		return st.flushFailed(err, len(pending))
	}
	p := st.pool.Load()
	resync := st.overflow.Swap(false)
	var replaceAt time.Time
	if p != nil && (resync || final) {
		now := st.s.Clock.Now()
		for _, sb := range p.Save(now).Breakers {
			pending.add(sb)
		}
		if resync {
			// Transitions were turned away: rows of this pool's exits and origins that the snapshot
			// does not hold have closed since. Drop them (if not changed after the snapshot).
			replaceAt = now
			st.resyncs.Add(1)
			st.log.Warn("sqlitestore: transition queue overflowed; writing a full snapshot instead",
				"path", st.path, "queue_size", st.s.QueueSize, "dropped_so_far", st.dropped.Load())
		}
	}
	if len(pending) == 0 && replaceAt.IsZero() {
		return nil
	}
	err := st.commit(pending, p, replaceAt)
	if err != nil {
		if resync {
			st.overflow.Store(true) // do it again next time
		}
		return st.flushFailed(classify(st.path, err), len(pending))
	}
	st.written.Add(uint64(len(pending)))
	clear(pending)
	if st.setErr(nil) != nil {
		st.log.Info("sqlitestore: flushing again", "path", st.path)
	}
	return nil
}

// flushFailed notes err as the last error and logs it when it is news (the first failure, or a
// different one): a retry every FlushInterval that fails alike stays quiet.
func (st *Store) flushFailed(err error, rows int) error {
	if prev := st.setErr(err); prev == nil || prev.Error() != err.Error() {
		st.log.Error("sqlitestore: flush failed; will retry", "path", st.path, "rows", rows, "err", err)
	}
	return err
}

func (st *Store) commit(pending batch, p *pool.Pool, replaceAt time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), st.s.BusyTimeout+30*time.Second)
	defer cancel()
	tx, err := st.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if !replaceAt.IsZero() && p != nil {
		if err := dropMissing(ctx, tx, pending, p, replaceAt); err != nil {
			return err
		}
	}
	stmt, err := tx.PrepareContext(ctx, upsert)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, sb := range pending {
		state := sb.State.String()
		if _, err := stmt.ExecContext(ctx, sb.Scope.String(), sb.Exit, sb.Origin, state, sb.Parked,
			sb.Level, int64(sb.Trips), unixNano(sb.NextProbe), unixNano(sb.ClosedAt), sb.LastFailure,
			unixNano(sb.Changed)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// dropMissing deletes the rows of p's exits and of origins that the snapshot in pending does not
// hold and that were last changed before at.
func dropMissing(ctx context.Context, tx *sql.Tx, pending batch, p *pool.Pool, at time.Time) error {
	rows, err := tx.QueryContext(ctx, `SELECT scope, exit_label, origin FROM breakers WHERE changed <= ?`, at.UnixNano())
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, e := range p.Exits() {
		known[e.Label()] = true
	}
	var gone []store.Key
	for rows.Next() {
		var scope string
		var k store.Key
		if err := rows.Scan(&scope, &k.Exit, &k.Origin); err != nil {
			rows.Close()
			return err
		}
		if err := k.Scope.UnmarshalText([]byte(scope)); err != nil {
			continue
		}
		if _, ok := pending[k]; ok {
			continue
		}
		if k.Scope == pool.ScopeOrigin || known[k.Exit] {
			gone = append(gone, k)
		}
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for _, k := range gone {
		if _, err := tx.ExecContext(ctx, `DELETE FROM breakers WHERE scope = ? AND exit_label = ? AND origin = ?`,
			k.Scope.String(), k.Exit, k.Origin); err != nil {
			return err
		}
	}
	return nil
}

// Package sqlitestore keeps a pool's breaker state in an embedded SQLite file, so that a restarted
// process does not send its first minutes of traffic into exits and origins that had just banned
// it. It is pure Go (modernc.org/sqlite): no cgo.
//
//	transport.Transport → pool: breaker transition → (*Store).StateChanged: enqueue, never wait
//	                                                   → writer goroutine: batch, one transaction per flush
//	                                                   → state file (WAL)
//	process start → Open → Pool.Observe(store) → (*Store).Bind → Pool.Restore: OPEN pairs keep their
//	                                             remaining window and trip count, parked exits stay parked
//
// Its import path is …/store/sqlite; the package is named sqlitestore so that it never shadows
// the driver's package sqlite where both are imported.
//
// # Durability
//
// The request path only enqueues. The writer commits what is queued at most Settings.FlushInterval
// (default 500 ms) after the first transition of a batch, in one transaction, in WAL mode with
// synchronous=NORMAL: a committed transition survives the process being killed (kill -9, a crash,
// an OOM kill), because the WAL write is in the operating system's hands once the commit returns.
// So a kill -9 loses at most the transitions of the last DurabilityBound (FlushInterval plus
// CommitAllowance, 750 ms by default); everything older is restored. A power cut or kernel crash
// can also lose the commits not yet checkpointed unless Settings.Sync is set
// (synchronous=FULL, an fsync per commit).
//
// If the queue overflows (more than Settings.QueueSize transitions waiting, far beyond any real
// workload), nothing is lost silently: the writer notes it, logs a warning, and writes a full
// snapshot of the pool (Pool.Save) with its next flush.
//
// # Bad files
//
// Open checks the file before anything is restored: a file that is not a database or is damaged
// (PRAGMA quick_check) is ErrCorrupt; a database of another schema version, or one that is not a
// proxybreaker state file at all, is ErrSchema; a file another connection holds a write lock on
// for longer than Settings.BusyTimeout is ErrLocked. Each comes as a *FileError naming the file
// and the remedy. With Settings.StartFresh, a corrupt or foreign file is renamed aside (kept, never
// deleted) and a fresh file started, with a warning on Settings.Logger. A locked file is always an
// error: starting afresh would mean writing beside a process that is using it.
package sqlitestore

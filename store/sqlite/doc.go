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
// Open checks the file before anything is restored: a file that is not a database, is damaged
// (PRAGMA quick_check) or holds a row this build cannot parse is ErrCorrupt; a database of another
// schema version or other columns, or one that is not a proxybreaker state file at all, is
// ErrSchema; a file another connection holds a write lock on for longer than Settings.BusyTimeout
// is ErrLocked; a file that a real write fails on (not a mode check, which root passes) is
// ErrReadOnly. Each comes as a *FileError naming the file and the remedy. With
// Settings.StartFresh, a corrupt or foreign file is renamed aside (kept, never deleted) and a fresh
// file started, with a warning on Settings.Logger. A locked or unwritable file is always an error:
// starting afresh would mean writing beside a process that is using it, or failing alike.
//
// While the Store runs, each flush first checks that the path still names the file it opened and
// that the file can still be written. A file unlinked from under SQLite — removed, its directory
// removed, or renamed over — takes commits without an error, and they vanish with it; so such a
// file is ErrGone, and an unwritable one ErrReadOnly, from every later Flush, in Stats().LastErr
// and from Close, and the first failure is logged on Settings.Logger.
//
// # One writer
//
// A state file has one Store at a time. Two would each restore it and then overwrite each other's
// rows with their own pool's view, and SQLite would let them: it serialises transactions, not
// writers. So Open takes an exclusive lock on a lock file beside the state file (PATH.lock, after
// resolving symbolic links, so two spellings of one path share it) and, on Linux, one on the state
// file itself (so a hard link, another name for the same file, shares it too), and holds them until
// Close;
// another Open of the file, from any process or from this one, fails at once with an ErrLocked
// *FileError that names the file, the lock file and, where it can, the holder's pid. The lock is
// flock(2) on Unix — it belongs to the open file, so it excludes a second Store within one process
// too — and a handle opened without sharing on Windows. Only Linux also flocks the state file: on
// the BSDs and macOS flock and SQLite's fcntl locks on one file conflict, so there a hard link
// escapes the lock. Either way the operating system drops it
// with the process: a Store killed with kill -9 leaves no stale lock, and the next Open simply
// takes it. The lock file itself stays (removing it would let two Stores each hold a lock on a
// different file of that name); it holds the last holder's pid and nothing else.
//
// Why not SQLite's own locking_mode=EXCLUSIVE: it locks the database file itself, so a second
// Store would only be refused after waiting out BusyTimeout, and the file could no longer be read
// by anything else — the sqlite3 shell, a backup — while the process runs. The lock file excludes
// only other Stores, immediately; other connections are still governed by SQLite's locks and the
// busy timeout (ErrLocked after BusyTimeout, as above). Like SQLite's WAL mode, it assumes a local
// file system: it guards nothing on a network share that does not honour flock.
package sqlitestore

package sqlitestore

import "os"

// lockStateFile takes an exclusive flock(2) on the state file itself, without waiting; held
// reports one another open file holds (another Store, here or in another process, under any name).
// On Linux flock and the fcntl locks SQLite takes on the same file never interact.
func lockStateFile(f *os.File) (held bool, err error) { return flockFile(f) }

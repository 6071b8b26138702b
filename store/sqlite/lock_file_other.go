//go:build !linux

package sqlitestore

import "os"

// lockStateFile locks nothing here: on the BSDs and macOS a flock on the state file would conflict
// with the fcntl locks SQLite takes on it, and on Windows a handle without sharing would shut
// SQLite out. The lock file beside the state file still guards it, by path; a hard link escapes it.
func lockStateFile(*os.File) (held bool, err error) { return false, nil }

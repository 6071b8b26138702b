package sqlitestore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LockSuffix is what the name of a state file's lock file adds to the state file's: a Store on
// /var/lib/app/state.db holds /var/lib/app/state.db.lock for as long as it is open.
const LockSuffix = ".lock"

// fileLock is a Store's hold on its state file: an exclusive lock on the lock file beside it and,
// on Linux, one on the state file itself, held from Open to Close and released by the operating
// system when the process dies however it dies.
type fileLock struct {
	f    *os.File
	path string   // the lock file's
	file *os.File // the state file itself, open read-only: its identity (and its lock)
}

// lockFor takes the lock of the state file at path for this Store, or fails at once with an
// ErrLocked *FileError when another Store — in this process or another, by this path or through
// a hard link — holds it. The lock file is created if need be and never removed: removing it
// would let a Store that opened the old one and a Store that created a new one both hold "the"
// lock. The state file is created, empty, if need be.
func lockFor(path string) (*fileLock, error) {
	name := lockPath(path)
	f, held, err := openLocked(name)
	if err != nil {
		return nil, &FileError{Path: path, Err: fmt.Errorf("lock file %s: %v", name, err)}
	}
	if held {
		return nil, &FileError{Path: path, Kind: ErrLocked, Err: heldBy(name)}
	}
	// The holder's pid, for the error a second Store gets. Best effort: the lock is what counts.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	l := &fileLock{f: f, path: name}
	if err := l.lockFile(path); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

// lockFile opens the state file at path itself and locks it: the lock beside it is keyed by the
// path, this one by the file, so that a Store opened through a hard link is refused too.
func (l *fileLock) lockFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return &FileError{Path: path, Err: err}
	}
	held, err := lockStateFile(f)
	if err != nil || held {
		f.Close()
	}
	switch {
	case held:
		return &FileError{Path: path, Kind: ErrLocked,
			Err: errors.New("another Store has this file open under another name (a hard link) and holds its lock")}
	case err != nil:
		return &FileError{Path: path, Err: fmt.Errorf("lock: %v", err)}
	}
	l.file = f
	return nil
}

// unlockFile lets the state file go (keeping the lock beside it), before StartFresh moves it aside.
// Closing any descriptor of a file drops the process's fcntl locks on it, SQLite's among them: so
// only once SQLite has closed the file.
func (l *fileLock) unlockFile() {
	if l.file != nil {
		l.file.Close()
		l.file = nil
	}
}

// release gives both locks up, once SQLite has closed the file. The lock file stays.
func (l *fileLock) release() error {
	l.unlockFile()
	return l.f.Close()
}

// lockPath is the lock file of the state file at path, beside the file path names once symbolic
// links are resolved, so that two spellings of one file (a relative path, a link) share one lock.
func lockPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path + LockSuffix
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real + LockSuffix
	}
	// No such file yet: resolve its directory.
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(dir, filepath.Base(abs)) + LockSuffix
	}
	return abs + LockSuffix
}

// heldBy says who holds the lock file name, from the pid its holder wrote into it (where the
// platform lets a second process read it).
func heldBy(name string) error {
	pid := 0
	if f, err := os.Open(name); err == nil {
		var buf [24]byte
		n, _ := io.ReadFull(f, buf[:])
		f.Close()
		if p, err := strconv.Atoi(strings.TrimSpace(string(buf[:n]))); err == nil && p > 0 {
			pid = p
		}
	}
	switch {
	case pid == os.Getpid():
		return fmt.Errorf("another Store in this process (pid %d) has it open and holds %s", pid, name)
	case pid > 0:
		return fmt.Errorf("another Store has it open: process %d holds %s", pid, name)
	}
	return fmt.Errorf("another Store has it open and holds %s", name)
}

//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package sqlitestore

import (
	"errors"
	"os"
	"syscall"
)

// openLocked opens (or creates) the lock file name and takes an exclusive flock(2) on it without
// waiting. held reports a lock another open file holds — in another process, or in this one: a
// flock belongs to the open file, not to the process, unlike the fcntl locks SQLite takes on the
// database (which the two never interfere with). The kernel drops the lock when the file is
// closed, so also when the process dies, kill -9 included; os.OpenFile sets O_CLOEXEC, so no
// child process inherits it.
func openLocked(name string) (f *os.File, held bool, err error) {
	f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, err
	}
	held, err = flockFile(f)
	if err != nil || held {
		f.Close()
		return nil, held, err
	}
	return f, false, nil
}

// flockFile takes an exclusive flock(2) on f without waiting; held reports one another open file
// holds.
func flockFile(f *os.File) (held bool, err error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return false, err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if lerr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB); lerr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return false, err
	}
	if errors.Is(lerr, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, lerr
}

// writable reports why path cannot be written by this process, or nil: the kernel's answer
// (access(2)), so a read-only file system or an immutable file stops root too.
func writable(path string) error {
	const wOK = 2 // W_OK
	return syscall.Access(path, wOK)
}

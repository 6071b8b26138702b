//go:build windows

package sqlitestore

import (
	"errors"
	"os"
	"syscall"
)

// errorSharingViolation is ERROR_SHARING_VIOLATION: the file is open elsewhere without sharing.
const errorSharingViolation = syscall.Errno(32)

// openLocked opens (or creates) the lock file name with no sharing at all, so that no other
// handle — in another process, or in this one — can open it until this one is closed. held
// reports a file open elsewhere. Windows closes the handle when the process dies, however it
// dies; it is not inheritable.
func openLocked(name string) (f *os.File, held bool, err error) {
	p, err := syscall.UTF16PtrFromString(name)
	if err != nil {
		return nil, false, err
	}
	h, err := syscall.CreateFile(p, syscall.GENERIC_READ|syscall.GENERIC_WRITE, 0, nil,
		syscall.OPEN_ALWAYS, syscall.FILE_ATTRIBUTE_NORMAL, 0)
	if err == errorSharingViolation {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	return os.NewFile(uintptr(h), name), false, nil
}

// writable reports why path cannot be written, or nil: its read-only attribute.
func writable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o200 == 0 {
		return errors.New("read-only attribute set")
	}
	return nil
}

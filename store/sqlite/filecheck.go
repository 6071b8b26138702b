package sqlitestore

import (
	"errors"
	"io/fs"
	"os"
)

// checkFile reports whether path still names the state file held, open since Open, and whether
// that file can still be written. Removed with its directory, or unlinked, or renamed over, the
// file SQLite writes is no longer the one at path: its commits succeed and vanish. Made read-only,
// it would be refused by the next Open. Either is a *FileError (ErrGone, ErrReadOnly).
func checkFile(path string, held *os.File) error {
	was, err := held.Stat()
	if err != nil {
		return &FileError{Path: path, Err: err}
	}
	now, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &FileError{Path: path, Kind: ErrGone, Err: errors.New("it (or its directory) was removed while the Store had it open")}
	case err != nil:
		return &FileError{Path: path, Err: err}
	case !os.SameFile(was, now):
		return &FileError{Path: path, Kind: ErrGone, Err: errors.New("another file took its name while the Store had it open")}
	}
	if err := writable(path); err != nil {
		return &FileError{Path: path, Kind: ErrReadOnly, Err: err}
	}
	return nil
}

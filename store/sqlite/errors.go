package sqlitestore

import (
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The kinds of bad state file. A *FileError matches one of them with errors.Is.
var (
	// ErrCorrupt: the file is not an SQLite database, or is damaged.
	ErrCorrupt = errors.New("sqlitestore: corrupt state file")
	// ErrSchema: the database is of another schema version, or not a proxybreaker state file.
	ErrSchema = errors.New("sqlitestore: unexpected schema")
	// ErrLocked: another Store has the file open, in this process or another, by this path or
	// another name for it (Open fails at once), or another connection holds the file's write lock
	// for longer than the busy timeout.
	ErrLocked = errors.New("sqlitestore: state file locked")
	// ErrReadOnly: the file cannot be written — refused at Open; while the Store runs, every flush
	// fails with it until the file is writable again.
	ErrReadOnly = errors.New("sqlitestore: state file not writable")
	// ErrGone: the file was removed (or its directory), or another file took its name, while the
	// Store had it open: what the Store writes no longer reaches that path. Every later flush, and
	// Close, fails with it.
	ErrGone = errors.New("sqlitestore: state file gone")
)

// FileError is an error about the state file at Path. Kind is ErrCorrupt, ErrSchema, ErrLocked,
// ErrReadOnly, ErrGone or nil (any other trouble: a missing directory, no permission);
// errors.Is(err, Kind) holds.
type FileError struct {
	Path string
	Kind error
	Err  error
}

// Error returns the message: the file, what is wrong with it and, for a bad file, the remedy.
func (e *FileError) Error() string {
	switch e.Kind {
	case ErrCorrupt:
		return fmt.Sprintf("sqlitestore: %s is corrupt: %v (Settings.StartFresh moves it aside and starts an empty file)", e.Path, e.Err)
	case ErrSchema:
		return fmt.Sprintf("sqlitestore: %s: %v (Settings.StartFresh moves it aside and starts an empty file)", e.Path, e.Err)
	case ErrLocked:
		return fmt.Sprintf("sqlitestore: %s is locked by another connection: %v (stop the process that holds it, or give this one its own file)", e.Path, e.Err)
	case ErrReadOnly:
		return fmt.Sprintf("sqlitestore: %s cannot be written: %v", e.Path, e.Err)
	case ErrGone:
		return fmt.Sprintf("sqlitestore: %s is gone: %v (the breaker state is no longer saved; reopen the store on a file that stays)", e.Path, e.Err)
	}
	return fmt.Sprintf("sqlitestore: %s: %v", e.Path, e.Err)
}

// Is reports whether target is e's Kind.
func (e *FileError) Is(target error) bool { return e.Kind != nil && target == e.Kind }

// Unwrap returns the underlying error.
func (e *FileError) Unwrap() error { return e.Err }

// classify wraps err, an error from opening or reading path, in a *FileError of the right kind.
func classify(path string, err error) error {
	var fe *FileError
	if errors.As(err, &fe) {
		if fe.Path == "" {
			fe.Path = path
		}
		return fe
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
			return &FileError{Path: path, Kind: ErrCorrupt, Err: err}
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return &FileError{Path: path, Kind: ErrLocked, Err: err}
		case sqlite3.SQLITE_READONLY:
			return &FileError{Path: path, Kind: ErrReadOnly, Err: err}
		}
	}
	return &FileError{Path: path, Err: err}
}

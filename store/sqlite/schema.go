package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// SchemaVersion is the version of the tables this package reads and writes, kept in the file's
// schema_version table. A file of another version is refused (ErrSchema), never rewritten.
const SchemaVersion = 1

// schema creates the tables of a fresh file. Instants are Unix nanoseconds, 0 for none; a row is
// a pool.SavedBreaker.
var schema = []string{
	`CREATE TABLE schema_version (version INTEGER NOT NULL)`,
	fmt.Sprintf(`INSERT INTO schema_version (version) VALUES (%d)`, SchemaVersion),
	`CREATE TABLE breakers (
		scope        TEXT    NOT NULL,
		exit_label   TEXT    NOT NULL,
		origin       TEXT    NOT NULL,
		state        TEXT    NOT NULL,
		parked       INTEGER NOT NULL,
		level        INTEGER NOT NULL,
		trips        INTEGER NOT NULL,
		next_probe   INTEGER NOT NULL,
		closed_at    INTEGER NOT NULL,
		last_failure TEXT    NOT NULL,
		changed      INTEGER NOT NULL,
		PRIMARY KEY (scope, exit_label, origin)
	) WITHOUT ROWID`,
}

// openDB opens path, checks it is a healthy state file of SchemaVersion (creating the tables in an
// empty one) and that its write lock can be had, and returns the handle. Every error is a
// *FileError.
func openDB(path string, s *Settings) (*sql.DB, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	sync := "NORMAL"
	if s.Sync {
		sync = "FULL"
	}
	// busy_timeout and synchronous are per connection: the driver runs them on every connection it
	// opens. _txlock=immediate: every transaction here writes, so it takes the write lock at BEGIN
	// and waits (busy_timeout) there rather than failing at its first write.
	dsn := fmt.Sprintf("%s?_pragma=busy_timeout(%d)&_pragma=synchronous(%s)&_txlock=immediate",
		path, s.BusyTimeout.Milliseconds(), sync)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, classify(path, err)
	}
	db.SetMaxOpenConns(1) // one writer goroutine; a second connection would only contend for the lock
	if err := checkDB(db, s.BusyTimeout); err != nil {
		db.Close()
		return nil, classify(path, err)
	}
	return db, nil
}

// checkPath refuses a path the driver would read as a URI with parameters, or none at all.
func checkPath(path string) error {
	if path == "" || strings.ContainsAny(path, "?#") {
		return &FileError{Path: path, Err: errors.New("want a file path without '?' or '#'")}
	}
	return nil
}

func checkDB(db *sql.DB, busy time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), busy+30*time.Second)
	defer cancel()
	var mode string
	if err := db.QueryRowContext(ctx, `PRAGMA journal_mode=WAL`).Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode %q, want wal", mode)
	}
	if err := quickCheck(ctx, db); err != nil {
		return err
	}
	tables, err := tableNames(ctx, db)
	if err != nil {
		return err
	}
	switch {
	case len(tables) == 0:
		return createSchema(ctx, db)
	case !slices.Contains(tables, "schema_version"):
		return &FileError{Kind: ErrSchema, Err: fmt.Errorf("not a proxybreaker state file (no schema_version table; tables: %s)", strings.Join(tables, ", "))}
	}
	var versions []int
	rows, err := db.QueryContext(ctx, `SELECT version FROM schema_version`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return err
		}
		versions = append(versions, v)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	switch {
	case len(versions) != 1:
		return &FileError{Kind: ErrSchema, Err: fmt.Errorf("schema_version holds %d rows, want 1", len(versions))}
	case versions[0] != SchemaVersion:
		return &FileError{Kind: ErrSchema, Err: fmt.Errorf("schema version %d, this build reads version %d", versions[0], SchemaVersion)}
	case !slices.Contains(tables, "breakers"):
		return &FileError{Kind: ErrSchema, Err: fmt.Errorf("schema version %d without its breakers table", SchemaVersion)}
	}
	// Take the write lock once, so a file another process holds is reported now, not at the first
	// flush.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	return tx.Rollback()
}

// quickCheck runs PRAGMA quick_check and turns anything but "ok" into ErrCorrupt.
func quickCheck(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `PRAGMA quick_check(5)`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return err
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(problems) > 0 {
		return &FileError{Kind: ErrCorrupt, Err: fmt.Errorf("quick_check: %s", strings.Join(problems, "; "))}
	}
	return nil
}

func tableNames(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, rows.Err()
}

func createSchema(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, stmt := range schema {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return tx.Commit()
}

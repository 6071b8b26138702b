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

// column is one column of the breakers table; pk is its place in the primary key (1-based, 0 for
// none), as PRAGMA table_info reports it.
type column struct {
	name, typ string
	pk        int
}

// breakerColumns are the breakers table's columns, in order. Instants are Unix nanoseconds, 0 for
// none; a row is a pool.SavedBreaker. Open checks a file's table against them.
var breakerColumns = []column{
	{"scope", "TEXT", 1}, {"exit_label", "TEXT", 2}, {"origin", "TEXT", 3},
	{"state", "TEXT", 0}, {"parked", "INTEGER", 0}, {"level", "INTEGER", 0}, {"trips", "INTEGER", 0},
	{"next_probe", "INTEGER", 0}, {"closed_at", "INTEGER", 0}, {"last_failure", "TEXT", 0},
	{"changed", "INTEGER", 0},
}

// schema creates the tables of a fresh file.
var schema = []string{
	`CREATE TABLE schema_version (version INTEGER NOT NULL)`,
	fmt.Sprintf(`INSERT INTO schema_version (version) VALUES (%d)`, SchemaVersion),
	createBreakers(),
}

func createBreakers() string {
	var cols, key []string
	for _, c := range breakerColumns {
		cols = append(cols, c.name+" "+c.typ+" NOT NULL")
		if c.pk > 0 {
			key = append(key, c.name)
		}
	}
	return fmt.Sprintf("CREATE TABLE breakers (%s, PRIMARY KEY (%s)) WITHOUT ROWID",
		strings.Join(cols, ", "), strings.Join(key, ", "))
}

// openDB opens path, checks it is a healthy state file of SchemaVersion (creating the tables in an
// empty one) whose columns and rows this build reads, and that it can be written, and returns the
// handle. Every error is a *FileError.
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
	if err := checkColumns(ctx, db); err != nil {
		return err
	}
	// Every row this build will restore must parse now, while StartFresh can still move the file
	// aside, not at Bind.
	if _, err := readBreakers(ctx, db); err != nil {
		return err
	}
	// Write once (the version the file already holds), so that a file this process cannot write
	// (ErrReadOnly) or another process holds the write lock on (ErrLocked) is reported now, not at
	// the first flush.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = version`); err != nil {
		return err
	}
	return tx.Commit()
}

// checkColumns compares the breakers table with breakerColumns: a missing column, one of another
// type or primary-key place, or one this build does not know is ErrSchema, naming each.
func checkColumns(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `SELECT name, type, pk FROM pragma_table_info('breakers')`)
	if err != nil {
		return err
	}
	have := map[string]column{}
	var unknown []string
	for rows.Next() {
		var c column
		if err := rows.Scan(&c.name, &c.typ, &c.pk); err != nil {
			rows.Close()
			return err
		}
		have[c.name] = c
		if !slices.ContainsFunc(breakerColumns, func(w column) bool { return w.name == c.name }) {
			unknown = append(unknown, c.name)
		}
	}
	if err := rows.Close(); err != nil {
		return err
	}
	var problems []string
	for _, w := range breakerColumns {
		switch c, ok := have[w.name]; {
		case !ok:
			problems = append(problems, "no column "+w.name)
		case !strings.EqualFold(c.typ, w.typ) || c.pk != w.pk:
			problems = append(problems, fmt.Sprintf("column %s is %s (primary key place %d), want %s (%d)", w.name, c.typ, c.pk, w.typ, w.pk))
		}
	}
	for _, name := range unknown {
		problems = append(problems, "unknown column "+name)
	}
	if len(problems) > 0 {
		return &FileError{Kind: ErrSchema, Err: fmt.Errorf("breakers table: %s", strings.Join(problems, "; "))}
	}
	return nil
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

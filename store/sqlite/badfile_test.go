package sqlitestore_test

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/store/internal/storetest"
	sqlitestore "github.com/proxybreaker/proxybreaker/store/sqlite"
)

// rawExec runs statements on path with a plain connection, outside the store.
func rawExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// wantFileError checks that err is a *FileError of kind naming path, whose message contains
// every one of wants.
func wantFileError(t *testing.T, err error, kind error, path string, wants ...string) {
	t.Helper()
	var fe *sqlitestore.FileError
	if !errors.As(err, &fe) || !errors.Is(err, kind) || fe.Path != path {
		t.Fatalf("err = %v (%T), want a *FileError for %s matching %v", err, err, path, kind)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

func TestCorruptFile(t *testing.T) {
	dir := t.TempDir()

	// Not a database at all.
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, bytes.Repeat([]byte("this is not a database\n"), 400), 0o600)
	_, err := sqlitestore.Open(garbage, sqlitestore.Settings{Logger: quiet(nil)})
	wantFileError(t, err, sqlitestore.ErrCorrupt, garbage, garbage, "is corrupt", "not a database", "StartFresh")

	// A real state file whose pages were overwritten.
	damaged := filepath.Join(dir, "damaged.db")
	st, err := sqlitestore.Open(damaged, sqlitestore.Settings{Logger: quiet(nil)})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	var stmts []string
	for i := range 500 {
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO breakers VALUES ('pair', 'x%d', '%s.example', 'open', 0, 1, 1, 1, 0, 'rate_limited', 1)`, i, strings.Repeat("o", 100)))
	}
	rawExec(t, damaged, stmts...)
	data, err := os.ReadFile(damaged)
	if err != nil || len(data) < 8*4096 {
		t.Fatalf("damaged file: %d bytes, %v; want several pages", len(data), err)
	}
	for i := 3 * 4096; i < len(data)-4096; i += 4096 {
		copy(data[i:i+64], bytes.Repeat([]byte{0xA5}, 64)) // trample every page header from page 4 on
	}
	os.WriteFile(damaged, data, 0o600)
	_, err = sqlitestore.Open(damaged, sqlitestore.Settings{Logger: quiet(nil)})
	wantFileError(t, err, sqlitestore.ErrCorrupt, damaged, "is corrupt", "StartFresh")
	t.Logf("damaged file: %v", err)
}

func TestWrongSchema(t *testing.T) {
	dir := t.TempDir()
	newer := filepath.Join(dir, "newer.db")
	rawExec(t, newer, `CREATE TABLE schema_version (version INTEGER NOT NULL)`, `INSERT INTO schema_version VALUES (2)`,
		`CREATE TABLE breakers (x)`)
	_, err := sqlitestore.Open(newer, sqlitestore.Settings{Logger: quiet(nil)})
	wantFileError(t, err, sqlitestore.ErrSchema, newer, "schema version 2, this build reads version 1", "StartFresh")

	foreign := filepath.Join(dir, "foreign.db")
	rawExec(t, foreign, `CREATE TABLE users (name TEXT)`)
	_, err = sqlitestore.Open(foreign, sqlitestore.Settings{Logger: quiet(nil)})
	wantFileError(t, err, sqlitestore.ErrSchema, foreign, "not a proxybreaker state file", "users")

}

// TestOpenChecksColumnsAndRows: a file with the right schema version but a breakers table of
// other columns (ErrSchema), or with a row this build cannot read (ErrCorrupt), is refused by
// Open, naming the file and what is wrong — not accepted and failing later at Bind or at the
// first flush — so that StartFresh moves it aside.
func TestOpenChecksColumnsAndRows(t *testing.T) {
	version := []string{`CREATE TABLE schema_version (version INTEGER NOT NULL)`, `INSERT INTO schema_version VALUES (1)`}
	good := `CREATE TABLE breakers (scope TEXT NOT NULL, exit_label TEXT NOT NULL, origin TEXT NOT NULL,
		state TEXT NOT NULL, parked INTEGER NOT NULL, level INTEGER NOT NULL, trips INTEGER NOT NULL,
		next_probe INTEGER NOT NULL, closed_at INTEGER NOT NULL, last_failure TEXT NOT NULL,
		changed INTEGER NOT NULL, PRIMARY KEY (scope, exit_label, origin)) WITHOUT ROWID`
	for i, tc := range []struct {
		name  string
		stmts []string
		kind  error
		wants []string
	}{
		{"missing column", []string{`CREATE TABLE breakers (scope TEXT, exit_label TEXT, origin TEXT, state TEXT,
			PRIMARY KEY (scope, exit_label, origin))`}, sqlitestore.ErrSchema, []string{"no column parked", "no column changed"}},
		{"wrong type", []string{strings.Replace(good, "level INTEGER", "level TEXT", 1)}, sqlitestore.ErrSchema,
			[]string{"column level is TEXT", "want INTEGER"}},
		{"no primary key", []string{strings.Replace(good, ", PRIMARY KEY (scope, exit_label, origin)) WITHOUT ROWID", ")", 1)},
			sqlitestore.ErrSchema, []string{"column scope", "primary key"}},
		{"unknown column", []string{strings.Replace(good, "changed INTEGER NOT NULL,", "changed INTEGER NOT NULL, extra TEXT,", 1)},
			sqlitestore.ErrSchema, []string{"unknown column extra"}},
		{"bad state", []string{good, `INSERT INTO breakers VALUES ('pair', 'x1', 'a.example', 'ajar', 0, 1, 1, 9000000000000000000, 0, '', 9000000000000000000)`},
			sqlitestore.ErrCorrupt, []string{`"x1"`, `"a.example"`, "ajar"}},
		{"text in an integer column", []string{good, `INSERT INTO breakers VALUES ('pair', 'x1', 'a.example', 'open', 0, 'high', 1, 1, 0, '', 1)`},
			sqlitestore.ErrCorrupt, []string{"breakers row 1", "high"}},
	} {
		path := filepath.Join(t.TempDir(), "state.db")
		rawExec(t, path, append(append([]string{}, version...), tc.stmts...)...)
		st, err := sqlitestore.Open(path, sqlitestore.Settings{Logger: quiet(nil)})
		if err == nil {
			st.Close()
			t.Errorf("step %d (%s): Open = a store, want %v", i, tc.name, tc.kind)
			continue
		}
		wantFileError(t, err, tc.kind, path, append([]string{path, "StartFresh"}, tc.wants...)...)

		st, err = sqlitestore.Open(path, sqlitestore.Settings{StartFresh: true, Logger: quiet(nil)})
		if err != nil {
			t.Errorf("step %d (%s): Open with StartFresh = %v, want a fresh file", i, tc.name, err)
			continue
		}
		if s, err := st.Load(); err != nil || len(s.Breakers) != 0 {
			t.Errorf("step %d (%s): Load() on the fresh file = %+v, %v", i, tc.name, s, err)
		}
		st.Close()
		if bad, _ := filepath.Glob(path + ".bad-*"); len(bad) != 1 {
			t.Errorf("step %d (%s): files moved aside: %v, want 1", i, tc.name, bad)
		}
	}
}

// TestStartFresh: with the opt-in, a corrupt or foreign file is moved aside, kept byte for byte,
// with a warning naming both files, and an empty state file takes its place.
func TestStartFresh(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	junk := bytes.Repeat([]byte("junk"), 2048)
	os.WriteFile(path, junk, 0o600)
	var logs bytes.Buffer
	st, err := sqlitestore.Open(path, sqlitestore.Settings{StartFresh: true, Logger: quiet(&logs),
		Clock: clock.NewFake(storetest.T0)})
	if err != nil {
		t.Fatalf("Open with StartFresh = %v", err)
	}
	defer st.Close()
	aside := path + ".bad-20260301T120000.000000000"
	if kept, err := os.ReadFile(aside); err != nil || !bytes.Equal(kept, junk) {
		t.Errorf("the corrupt file was not kept as %s (%v)", aside, err)
	}
	if !strings.Contains(logs.String(), "starting fresh") || !strings.Contains(logs.String(), aside) {
		t.Errorf("logs = %q, want a warning naming %s", logs.String(), aside)
	}
	if s, err := st.Load(); err != nil || len(s.Breakers) != 0 {
		t.Errorf("Load() on the fresh file = %+v, %v", s, err)
	}
}

// TestLockedFile: a file another connection holds the write lock on is ErrLocked after the busy
// timeout, StartFresh or not: starting afresh would write beside a process that uses it.
func TestLockedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := sqlitestore.Open(path, sqlitestore.Settings{Logger: quiet(nil)})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	lockFile(t, path)
	for _, fresh := range []bool{false, true} {
		start := time.Now()
		_, err := sqlitestore.Open(path, sqlitestore.Settings{BusyTimeout: 100 * time.Millisecond, StartFresh: fresh, Logger: quiet(nil)})
		wantFileError(t, err, sqlitestore.ErrLocked, path, "is locked by another connection")
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("Open of a locked file took %v, want about the 100ms busy timeout", took)
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the locked file is gone: %v", err)
	}
}

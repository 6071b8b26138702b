package sqlitestore_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/store/internal/storetest"
	sqlitestore "github.com/proxybreaker/proxybreaker/store/sqlite"
)

// wantWriteFailure checks that a store whose file was taken from under it says so everywhere: the
// next Flush, Stats().LastErr, the logger, and Close all report a *FileError of kind for path.
func wantWriteFailure(t *testing.T, e *env, logs *bytes.Buffer, kind error, path string) {
	t.Helper()
	e.tripAndPark(t)
	err := e.st.Flush()
	wantFileError(t, err, kind, path, path)
	if got := e.st.Stats().LastErr; !errors.Is(got, kind) {
		t.Errorf("Stats().LastErr = %v, want %v", got, kind)
	}
	if !strings.Contains(logs.String(), "flush failed") || !strings.Contains(logs.String(), path) {
		t.Errorf("logs = %q, want a flush failure naming %s", logs.String(), path)
	}
	e.tr.Close()
	e.p.Close()
	wantFileError(t, e.st.Close(), kind, path, path)
}

// TestStateFileGoneMidRun: a state file removed from under a running store — with its directory,
// alone, or renamed over by another file — takes SQLite's commits without an error (they go to the
// unlinked file), so the store checks the file itself: Flush, Stats().LastErr, the log and Close
// all report ErrGone.
func TestStateFileGoneMidRun(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breakIt func(dir, path string) error
	}{
		{"directory removed", func(dir, _ string) error { return os.RemoveAll(dir) }},
		{"file removed", func(_, path string) error { return os.Remove(path) }},
		{"file replaced", func(dir, path string) error {
			other := filepath.Join(dir, "other.db")
			if err := os.WriteFile(other, nil, 0o600); err != nil {
				return err
			}
			return os.Rename(other, path)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "state.db")
			var logs bytes.Buffer
			e := newEnv(t, path, storetest.T0, sqlitestore.Settings{Logger: quiet(&logs)})
			if err := tc.breakIt(dir, path); err != nil {
				t.Fatal(err)
			}
			wantWriteFailure(t, e, &logs, sqlitestore.ErrGone, path)
		})
	}
}

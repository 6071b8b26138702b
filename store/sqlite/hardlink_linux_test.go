package sqlitestore_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	sqlitestore "github.com/proxybreaker/proxybreaker/store/sqlite"
)

// TestHardLinkIsLocked: the lock is on the file, not only its path: while a Store has a file open,
// Open through a hard link to it — in another directory, from this process or a child — fails at
// once with ErrLocked naming the link; once the first Store is closed it succeeds.
func TestHardLinkIsLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	link := filepath.Join(t.TempDir(), "link.db")
	first := openOK(t, path)
	if err := os.Link(path, link); err != nil {
		t.Fatal(err)
	}
	st, err := sqlitestore.Open(link, sqlitestore.Settings{Logger: quiet(nil)})
	if err == nil {
		st.Close()
		t.Fatalf("Open(%s), a hard link to a file a Store has open = a store, want ErrLocked", link)
	}
	wantFileError(t, err, sqlitestore.ErrLocked, link, link, "hard link")

	if out := childOpenLocked(t, link); !strings.Contains(out, "hard link") {
		t.Errorf("the child's error %q does not say %q", out, "hard link")
	}

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if err := openOK(t, link).Close(); err != nil {
		t.Errorf("Close of the store opened through the link = %v", err)
	}
}

package sqlitestore_test

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"github.com/proxybreaker/proxybreaker/store/internal/storetest"
	sqlitestore "github.com/proxybreaker/proxybreaker/store/sqlite"
)

// Linux's FS_IOC_GETFLAGS, FS_IOC_SETFLAGS and FS_IMMUTABLE_FL (linux/fs.h).
const (
	fsIocGetFlags = 0x80086601
	fsIocSetFlags = 0x40086602
	fsImmutableFl = 0x10
)

// makeUnwritable makes path read-only for this process until the test ends: mode 0444, and for
// root, who writes through any mode, the immutable attribute (chattr +i) as well.
func makeUnwritable(t *testing.T, path string) {
	t.Helper()
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(path, 0o600) })
	if os.Geteuid() != 0 {
		return
	}
	if err := setImmutable(path, true); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("making %s immutable for root: %v", path, err)
		}
		t.Skipf("running as root, and %s cannot be made immutable here: %v", path, err)
	}
	t.Cleanup(func() {
		if err := setImmutable(path, false); err != nil {
			t.Errorf("clearing the immutable attribute of %s: %v", path, err)
		}
	})
}

func setImmutable(path string, on bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var flags int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), fsIocGetFlags, uintptr(unsafe.Pointer(&flags))); e != 0 {
		return e
	}
	if on {
		flags |= fsImmutableFl
	} else {
		flags &^= fsImmutableFl
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), fsIocSetFlags, uintptr(unsafe.Pointer(&flags))); e != 0 {
		return e
	}
	return nil
}

// TestOpenRefusesUnwritableFile: a state file this process cannot write is refused by Open with
// ErrReadOnly naming it — StartFresh or not, and the file is left where it is — rather than
// opened and failing at the first flush.
func TestOpenRefusesUnwritableFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	openOK(t, path).Close()
	makeUnwritable(t, path)
	for _, fresh := range []bool{false, true} {
		st, err := sqlitestore.Open(path, sqlitestore.Settings{StartFresh: fresh, Logger: quiet(nil)})
		if err == nil {
			st.Close()
		}
		wantFileError(t, err, sqlitestore.ErrReadOnly, path, path, "cannot be written")
	}
	if bad, _ := filepath.Glob(path + ".bad-*"); len(bad) > 0 {
		t.Errorf("an unwritable file was moved aside: %v", bad)
	}
}

// TestStateFileReadOnlyMidRun: a state file made read-only under a running store is reported by
// Flush, Stats().LastErr, the log and Close (ErrReadOnly): the next Open would refuse it.
func TestStateFileReadOnlyMidRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	var logs bytes.Buffer
	e := newEnv(t, path, storetest.T0, sqlitestore.Settings{Logger: quiet(&logs)})
	makeUnwritable(t, path)
	wantWriteFailure(t, e, &logs, sqlitestore.ErrReadOnly, path)
}

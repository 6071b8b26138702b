package sqlitestore_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/store/internal/storetest"
	sqlitestore "github.com/proxybreaker/proxybreaker/store/sqlite"
)

// childLockedExit is the exit status of an "open" child whose Open failed with ErrLocked.
const childLockedExit = 3

// childHold opens the store, says READY, and keeps it open until its stdin is closed (then it
// closes the store and exits 0) or it is killed.
func childHold(path string) int {
	st, err := sqlitestore.Open(path, sqlitestore.Settings{Logger: quiet(nil)})
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	fmt.Println("READY")
	io.Copy(io.Discard, os.Stdin)
	if err := st.Close(); err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	return 0
}

// childOpen tries to open the store once and prints the error, exiting childLockedExit for
// ErrLocked; a store it could open it closes again and prints OPENED.
func childOpen(path string) int {
	st, err := sqlitestore.Open(path, sqlitestore.Settings{Logger: quiet(nil)})
	if err != nil {
		fmt.Println(err)
		if errors.Is(err, sqlitestore.ErrLocked) {
			return childLockedExit
		}
		return 1
	}
	st.Close()
	fmt.Println("OPENED")
	return 0
}

// holder is a child process that holds a Store on a file.
type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // the rest of its output, closed at EOF
}

// startHolder starts a child that opens path and keeps it open, and waits until it has.
func startHolder(t *testing.T, path string) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=hold", childPathEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	t.Cleanup(h.kill)
	go func() {
		defer close(h.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
	}()
	select {
	case line, ok := <-h.lines:
		if line != "READY" {
			h.kill()
			t.Fatalf("holder process said %q (output open: %t), want READY", line, ok)
		}
	case <-time.After(20 * time.Second):
		h.kill()
		t.Fatal("the holder process never became ready")
	}
	return h
}

// close closes the holder's stdin, so that it closes its store and exits, and waits for it.
func (h *holder) close(t *testing.T) {
	t.Helper()
	h.stdin.Close()
	for line := range h.lines {
		t.Errorf("holder process said %q while closing", line)
	}
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("holder process: %v", err)
	}
}

// kill kills the holder with SIGKILL, if it still runs, and waits for it.
func (h *holder) kill() {
	if h.cmd.ProcessState != nil {
		return
	}
	h.cmd.Process.Signal(syscall.SIGKILL)
	for range h.lines {
	}
	h.cmd.Wait()
}

// openOK opens path and fails the test if it cannot.
func openOK(t *testing.T, path string) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(path, sqlitestore.Settings{Logger: quiet(nil)})
	if err != nil {
		t.Fatalf("Open(%s) = %v, want a store", path, err)
	}
	return st
}

// TestSecondStoreInProcessIsLocked: while a Store has a file open, a second Open of it in the same
// process — by the same path, a relative one, one through a symbolic link, or with StartFresh —
// fails at once with ErrLocked naming the file and touches nothing; after Close it succeeds and
// reads what the first one wrote.
func TestSecondStoreInProcessIsLocked(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	first := newEnv(t, path, storetest.T0, sqlitestore.Settings{})
	first.tripAndPark(t)
	want, _ := storetest.Pair(first.pool(), "x1", originA)

	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for i, tc := range []struct {
		path string
		s    sqlitestore.Settings
	}{
		{path, sqlitestore.Settings{}},
		{"state.db", sqlitestore.Settings{}},
		{"./state.db", sqlitestore.Settings{}},
		{filepath.Join(link, "state.db"), sqlitestore.Settings{}},
		{path, sqlitestore.Settings{StartFresh: true}},
	} {
		tc.s.Logger = quiet(nil)
		st, err := sqlitestore.Open(tc.path, tc.s)
		if err == nil {
			st.Close()
			t.Fatalf("step %d: Open(%s) while another Store has it = a store, want ErrLocked", i, tc.path)
		}
		wantFileError(t, err, sqlitestore.ErrLocked, tc.path, "is locked", "another Store in this process",
			fmt.Sprintf("pid %d", os.Getpid()), path+sqlitestore.LockSuffix)
	}
	if bad, _ := filepath.Glob(path + ".bad-*"); len(bad) > 0 {
		t.Errorf("a refused Open moved the file aside: %v", bad)
	}

	// The first store still writes; once it is closed, the next one opens the file and restores
	// what it wrote.
	if err := first.st.Flush(); err != nil {
		t.Fatalf("Flush on the first store = %v", err)
	}
	first.close()
	second := newEnv(t, path, storetest.T0.Add(time.Minute), sqlitestore.Settings{})
	if got, ok := storetest.Pair(second.pool(), "x1", originA); !ok || got.State != breaker.Open || !got.NextProbe.Equal(want.NextProbe) {
		t.Errorf("after Close, a new store restores (x1, %s) as %+v, want OPEN until %v", originA, got, want.NextProbe)
	}
}

// TestSecondProcessIsLocked: two processes never both have a file open. While a child process
// holds it, Open here fails at once with ErrLocked naming the file and the child's pid; once the
// child closes it, or is killed with SIGKILL (the lock dies with the process, though the lock
// file stays), Open succeeds. And while this process holds it, a child's Open fails.
func TestSecondProcessIsLocked(t *testing.T) {
	if testing.Short() {
		t.Skip("runs subprocesses")
	}
	path := filepath.Join(t.TempDir(), "state.db")
	for i, end := range []string{"close", "kill"} {
		h := startHolder(t, path)
		_, err := sqlitestore.Open(path, sqlitestore.Settings{Logger: quiet(nil)})
		wantFileError(t, err, sqlitestore.ErrLocked, path, "is locked",
			fmt.Sprintf("process %d holds %s", h.cmd.Process.Pid, path+sqlitestore.LockSuffix))
		if end == "close" {
			h.close(t)
		} else {
			h.kill()
			if _, err := os.Stat(path + sqlitestore.LockSuffix); err != nil {
				t.Errorf("step %d: the lock file is gone after the kill: %v", i, err)
			}
		}
		st := openOK(t, path)
		if err := st.Close(); err != nil {
			t.Errorf("step %d: Close = %v", i, err)
		}
	}

	// The other way round.
	st := openOK(t, path)
	defer st.Close()
	out := childOpenLocked(t, path)
	for _, want := range []string{path, "process " + strconv.Itoa(os.Getpid())} {
		if !strings.Contains(out, want) {
			t.Errorf("the child's error %q does not say %q", out, want)
		}
	}
}

// childOpenLocked runs a child process that opens path once, fails the test unless that Open
// failed with ErrLocked, and returns what the child printed: the error.
func childOpenLocked(t *testing.T, path string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=open", childPathEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != childLockedExit {
		t.Fatalf("a child's Open of %s while this process holds the file: %v, output %q; want exit status %d (ErrLocked)",
			path, err, out, childLockedExit)
	}
	return string(out)
}

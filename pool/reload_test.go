package pool_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// writeList replaces the file at path with text the way a careful writer does: a temporary file
// renamed over it, so that the reloader sees a new file whatever the file system's clock grain.
func writeList(t *testing.T, path, text string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// reloadFixture is a pool of no exits, a proxy-list file and a Reloader on it whose events go to a
// channel.
type reloadFixture struct {
	p      *pool.Pool
	clk    *clock.Fake
	r      *pool.Reloader
	path   string
	events chan pool.ReloadEvent
}

func newReloadFixture(t *testing.T, list string, s pool.ReloadSettings) *reloadFixture {
	t.Helper()
	f := &reloadFixture{path: filepath.Join(t.TempDir(), "proxies.txt"), events: make(chan pool.ReloadEvent, 16)}
	f.p, f.clk = newSyncPool(t, nil)
	writeList(t, f.path, list)
	s.OnReload = func(ev pool.ReloadEvent) { f.events <- ev }
	r, err := pool.NewReloader(f.p, f.path, s)
	if err != nil {
		t.Fatal(err)
	}
	f.r = r
	return f
}

// event returns the next reload event; it fails the test if none is waiting.
func (f *reloadFixture) event(t *testing.T) pool.ReloadEvent {
	t.Helper()
	select {
	case ev := <-f.events:
		return ev
	default:
		t.Fatal("no reload event")
		return pool.ReloadEvent{}
	}
}

// await waits for the next reload event of a Run in another goroutine. The bound only turns a
// hang into a failure; it is no timing assertion.
func (f *reloadFixture) await(t *testing.T) pool.ReloadEvent {
	t.Helper()
	select {
	case ev := <-f.events:
		return ev
	case <-time.After(time.Minute):
		t.Fatal("no reload event within a minute")
		return pool.ReloadEvent{}
	}
}

func (f *reloadFixture) noEvent(t *testing.T) {
	t.Helper()
	select {
	case ev := <-f.events:
		t.Fatalf("unexpected reload event %+v", ev)
	default:
	}
}

const (
	listAB  = "http://u:pw-a@10.0.0.1:3128 label=a\nhttp://u:pw-b@10.0.0.2:3128 label=b\n"
	listABC = listAB + "10.0.0.3:3128:u:pw-c label=c tier=1\n"
)

// TestReloaderCheckFollowsTheFile: Check loads the file the first time, does nothing while it is
// unchanged, and syncs the pool when it changes, keeping the state of unchanged exits.
func TestReloaderCheckFollowsTheFile(t *testing.T) {
	f := newReloadFixture(t, listAB, pool.ReloadSettings{})
	reloaded, res, err := f.r.Check()
	if !reloaded || err != nil || res != (pool.SyncResult{Added: 2}) {
		t.Fatalf("first Check() = %v, %+v, %v; want reloaded, added 2", reloaded, res, err)
	}
	if ev := f.event(t); ev.Err != nil || ev.Result != res || !ev.At.Equal(syncT0) {
		t.Errorf("event = %+v, want the first load at t0", ev)
	}
	if reloaded, _, err := f.r.Check(); reloaded || err != nil {
		t.Errorf("Check() on an unchanged file = %v, %v; want no reload", reloaded, err)
	}
	f.noEvent(t)

	pickVia(t, f.p, "a", "shop").Report(failVerdict)
	a := f.p.Exit("a")
	writeList(t, f.path, listABC)
	if reloaded, res, err := f.r.Check(); !reloaded || err != nil || res != (pool.SyncResult{Added: 1, Kept: 2}) {
		t.Fatalf("Check() after adding c = %v, %+v, %v; want added 1, kept 2", reloaded, res, err)
	}
	f.event(t)
	if got := labels(f.p.Exits()); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("exits = %v, want a b c", got)
	}
	if f.p.Exit("a") != a {
		t.Errorf("the unchanged exit a was replaced")
	}
	if ps, ok := pairStatus(f.p, "a", "shop"); !ok || ps.Breaker.State != breaker.Open {
		t.Errorf("pair (a, shop) after the reload = %v, want still open", ps.Breaker.State)
	}
	if last := f.r.Last(); last.Result != (pool.SyncResult{Added: 1, Kept: 2}) {
		t.Errorf("Last() = %+v, want the second reload", last)
	}
}

// TestReloaderBadFileKeepsExits: a bad line, an empty file and a missing file each change nothing,
// are reported once with the file's path and no password, and the next good file is loaded.
func TestReloaderBadFileKeepsExits(t *testing.T) {
	f := newReloadFixture(t, listAB, pool.ReloadSettings{})
	if _, err := f.r.Reload(); err != nil {
		t.Fatal(err)
	}
	f.event(t)
	for _, tc := range []struct {
		name, text string
		remove     bool
		want       []string
		is         error
	}{
		{name: "bad line", text: listAB + "http://u:hunter2@10.0.0.9:99999 label=x\n",
			want: []string{"proxies.txt", "line 3", `bad port "99999"`}},
		{name: "duplicate label", text: listAB + "http://u:hunter2@10.0.0.9:1 label=a\n",
			want: []string{`duplicate exit label "a"`}},
		{name: "empty", text: "# nothing yet\n", want: []string{"no proxies", "AllowEmpty"}, is: pool.ErrEmptyList},
		{name: "missing", remove: true, want: []string{"proxies.txt"}, is: os.ErrNotExist},
	} {
		if tc.remove {
			if err := os.Remove(f.path); err != nil {
				t.Fatal(err)
			}
		} else {
			writeList(t, f.path, tc.text)
		}
		reloaded, res, err := f.r.Check()
		var re *pool.ReloadError
		if !reloaded || !errors.As(err, &re) || re.Path != f.path || res != (pool.SyncResult{}) {
			t.Fatalf("%s: Check() = %v, %+v, %v; want a *ReloadError for %s", tc.name, reloaded, res, err, f.path)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: err = %q, want it to contain %q", tc.name, err, w)
			}
		}
		t.Logf("%s: %v", tc.name, err)
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: err = %v, want errors.Is %v", tc.name, err, tc.is)
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "pw-") {
			t.Errorf("%s: err = %q shows a password", tc.name, err)
		}
		if !strings.HasPrefix(err.Error(), "pool: reload ") || strings.Contains(err.Error(), "pool: pool:") {
			t.Errorf("%s: err = %q, want one package prefix", tc.name, err)
		}
		if ev := f.event(t); !errors.Is(ev.Err, err) && ev.Err.Error() != err.Error() {
			t.Errorf("%s: event error %v, want %v", tc.name, ev.Err, err)
		}
		if got := labels(f.p.Exits()); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("%s: exits = %v, want a b kept", tc.name, got)
		}
		if reloaded, _, err := f.r.Check(); reloaded || err != nil {
			t.Errorf("%s: second Check() = %v, %v; want the same bad file not read again", tc.name, reloaded, err)
		}
		f.noEvent(t)
	}
	writeList(t, f.path, "http://u:pw-a@10.0.0.1:3128 label=a\n")
	if reloaded, res, err := f.r.Check(); !reloaded || err != nil || res != (pool.SyncResult{Removed: 1, Kept: 1}) {
		t.Errorf("Check() on a good file again = %v, %+v, %v; want removed 1, kept 1", reloaded, res, err)
	}
}

// TestReloaderAllowEmpty: with AllowEmpty an empty list empties the pool.
func TestReloaderAllowEmpty(t *testing.T) {
	f := newReloadFixture(t, listAB, pool.ReloadSettings{AllowEmpty: true})
	if _, err := f.r.Reload(); err != nil {
		t.Fatal(err)
	}
	writeList(t, f.path, "")
	if res, err := f.r.Reload(); err != nil || res != (pool.SyncResult{Removed: 2}) || len(f.p.Exits()) != 0 {
		t.Errorf("Reload(empty, AllowEmpty) = %+v, %v with %d exits; want removed 2, none left", res, err, len(f.p.Exits()))
	}
}

// waitForTimers waits until clk has n timers pending: a goroutine has started waiting on it.
func waitForTimers(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	for i := 0; clk.Timers() != n; i++ {
		if i > 1_000_000 {
			t.Fatalf("fake clock has %d timers pending, want %d", clk.Timers(), n)
		}
		runtime.Gosched()
	}
}

// TestReloaderRunTicksOnThePoolClock: Run loads the file at once, looks again each Interval of the
// pool's fake clock (not before), and returns when its context ends.
func TestReloaderRunTicksOnThePoolClock(t *testing.T) {
	f := newReloadFixture(t, listAB, pool.ReloadSettings{Interval: 10 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.r.Run(ctx) }()
	if ev := f.await(t); ev.Err != nil || ev.Result.Added != 2 {
		t.Fatalf("first event = %+v, want the file loaded", ev)
	}
	waitForTimers(t, f.clk, 1)
	writeList(t, f.path, listABC)
	f.clk.Advance(9 * time.Second)
	f.noEvent(t) // the timer has not fired: nothing read
	if len(f.p.Exits()) != 2 {
		t.Errorf("exits = %d before the interval ended, want 2", len(f.p.Exits()))
	}
	f.clk.Advance(time.Second)
	if ev := f.await(t); ev.Err != nil || ev.Result != (pool.SyncResult{Added: 1, Kept: 2}) || !ev.At.Equal(syncT0.Add(10*time.Second)) {
		t.Errorf("event after 10 s = %+v, want c added at t0+10s", ev)
	}
	waitForTimers(t, f.clk, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run() = %v, want context.Canceled", err)
	}
	if n := f.clk.Timers(); n != 0 {
		t.Errorf("%d timers left after Run returned, want 0", n)
	}
}

// TestNewReloaderValidates: bad arguments are errors naming them.
func TestNewReloaderValidates(t *testing.T) {
	p, _ := newSyncPool(t, nil)
	for _, tc := range []struct {
		p    *pool.Pool
		path string
		s    pool.ReloadSettings
		want string
	}{
		{nil, "x", pool.ReloadSettings{}, "nil pool"},
		{p, "", pool.ReloadSettings{}, "empty path"},
		{p, "x", pool.ReloadSettings{Interval: -time.Second}, "Interval -1s"},
	} {
		if _, err := pool.NewReloader(tc.p, tc.path, tc.s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewReloader(%v, %q, %+v) = %v, want an error containing %q", tc.p != nil, tc.path, tc.s, err, tc.want)
		}
	}
}

package pool_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

var syncT0 = time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)

// syncRecorder records the events a pool's observers hear.
type syncRecorder struct {
	pool.NopObserver
	mu      sync.Mutex
	removed []*pool.Exit
	changes []pool.StateChange
}

func (r *syncRecorder) ExitRemoved(e *pool.Exit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removed = append(r.removed, e)
}

func (r *syncRecorder) StateChanged(c pool.StateChange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, c)
}

// take returns what was recorded since the last take.
func (r *syncRecorder) take() ([]*pool.Exit, []pool.StateChange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rm, ch := r.removed, r.changes
	r.removed, r.changes = nil, nil
	return rm, ch
}

// syncExit is a test exit: label, the port of its (never dialled) proxy URL, tier and weight.
func syncExit(label string, port, tier int, weight float64) *pool.Exit {
	return pool.MustParseExit(fmt.Sprintf("http://u:secret-%s@10.0.0.1:%d", label, port)).
		WithLabel(label).WithTier(tier).WithWeight(weight)
}

// newSyncPool is a pool of exits on a fake clock whose breakers trip on one failure and wait
// exactly 10 s, with no origin guard.
func newSyncPool(t *testing.T, rec *syncRecorder, exits ...*pool.Exit) (*pool.Pool, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(syncT0)
	s := breaker.Settings{FailureThreshold: 1, BaseCooldown: 10 * time.Second, Jitter: -1}
	opts := []pool.Option{
		pool.WithExits(exits...), pool.WithClock(clk), pool.WithSeed(3), pool.WithInlineSweep(),
		pool.WithPairSettings(s), pool.WithExitSettings(s),
		pool.WithOriginGuard(pool.OriginGuardSettings{Disabled: true}),
	}
	if rec != nil {
		opts = append(opts, pool.WithObserver(rec))
	}
	p, err := pool.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p, clk
}

// pickVia picks for origin through the exit labelled label.
func pickVia(t *testing.T, p *pool.Pool, label, origin string) *pool.Lease {
	t.Helper()
	l, err := p.Pick(context.Background(), pool.Request{Origin: origin, Exit: label})
	if err != nil {
		t.Fatalf("Pick(%s via %s) = %v", origin, label, err)
	}
	return &l
}

func exitStatus(t *testing.T, p *pool.Pool, label string) pool.ExitStatus {
	t.Helper()
	for _, es := range p.Snapshot().Exits {
		if es.Exit == label {
			return es
		}
	}
	t.Fatalf("no exit %q in the snapshot", label)
	return pool.ExitStatus{}
}

func pairStatus(p *pool.Pool, label, origin string) (pool.PairStatus, bool) {
	for _, ps := range p.Snapshot().Pairs {
		if ps.Exit == label && ps.Origin == origin {
			return ps, true
		}
	}
	return pool.PairStatus{}, false
}

func labels(exits []*pool.Exit) []string {
	out := make([]string, len(exits))
	for i, e := range exits {
		out[i] = e.Label()
	}
	return out
}

var (
	parkVerdict = pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}
	failVerdict = pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout}
)

// TestSyncKeepsStateOfSameProxies: each kind of label in one Sync — unchanged (kept, *Exit and
// all), a new weight or tier (updated: new *Exit, breakers kept), a new URL (replaced: fresh), new
// (added), missing (removed) — with the counts, the order and the events observers hear.
func TestSyncKeepsStateOfSameProxies(t *testing.T) {
	rec := &syncRecorder{}
	a, b, c, d, gone := syncExit("a", 1, 0, 1), syncExit("b", 2, 0, 1), syncExit("c", 3, 0, 1), syncExit("d", 4, 0, 1), syncExit("gone", 5, 0, 1)
	p, clk := newSyncPool(t, rec, a, b, c, d, gone)

	// a: pair OPEN for shop. b: parked. c: parked and its pair OPEN. d: pair OPEN.
	pickVia(t, p, "a", "shop").Report(failVerdict)
	pickVia(t, p, "b", "shop").Report(parkVerdict)
	pickVia(t, p, "c", "shop").Report(failVerdict)
	pickVia(t, p, "c", "news").Report(parkVerdict)
	pickVia(t, p, "d", "shop").Report(failVerdict)
	clk.Advance(time.Second)
	rec.take()

	a2 := syncExit("a", 1, 0, 1)  // same URL, tier and weight: kept
	b2 := syncExit("b", 2, 0, 3)  // new weight: updated
	d2 := syncExit("d", 4, 1, 1)  // new tier: updated
	c2 := syncExit("c", 33, 0, 1) // new URL: replaced
	e := syncExit("e", 6, 0, 1)   // new: added
	res, err := p.Sync([]*pool.Exit{e, d2, c2, b2, a2})
	if err != nil {
		t.Fatalf("Sync = %v", err)
	}
	want := pool.SyncResult{Added: 1, Removed: 1, Replaced: 1, Updated: 2, Kept: 1}
	if res != want {
		t.Errorf("Sync = %+v, want %+v", res, want)
	}
	if got, w := res.String(), "added 1, removed 1, replaced 1, updated 2, kept 1"; got != w {
		t.Errorf("SyncResult.String() = %q, want %q", got, w)
	}
	if got := labels(p.Exits()); !slices.Equal(got, []string{"e", "d", "c", "b", "a"}) {
		t.Errorf("Exits() = %v, want the list's order e d c b a", got)
	}

	// Kept: the pool's own *Exit, its pair still OPEN.
	if p.Exit("a") != a {
		t.Errorf("Exit(a) is the list's new *Exit, want the pool's old one kept")
	}
	if ps, ok := pairStatus(p, "a", "shop"); !ok || ps.Breaker.State != breaker.Open {
		t.Errorf("pair (a, shop) after Sync = %+v (listed %v), want still open", ps.Breaker.State, ok)
	}
	// Updated: the new *Exit, the old breakers.
	if p.Exit("b") != b2 || p.Exit("d") != d2 {
		t.Errorf("Exit(b), Exit(d) are not the list's new *Exits")
	}
	if st := exitStatus(t, p, "b"); st.Breaker.State != breaker.Open || !st.Breaker.Parked || st.Weight != 3 {
		t.Errorf("exit b after a weight change = %v parked %v weight %v, want open, parked, weight 3", st.Breaker.State, st.Breaker.Parked, st.Weight)
	}
	if ps, ok := pairStatus(p, "d", "shop"); !ok || ps.Breaker.State != breaker.Open {
		t.Errorf("pair (d, shop) after a tier change = %v (listed %v), want still open", ps.Breaker.State, ok)
	}
	if st := exitStatus(t, p, "d"); st.Tier != 1 {
		t.Errorf("exit d tier = %d, want 1", st.Tier)
	}
	// Replaced: fresh.
	if p.Exit("c") != c2 {
		t.Errorf("Exit(c) is not the list's new *Exit")
	}
	if st := exitStatus(t, p, "c"); st.Breaker.State != breaker.Closed || st.Breaker.Trips != 0 {
		t.Errorf("exit c after a URL change = %v with %d trips, want closed and fresh", st.Breaker.State, st.Breaker.Trips)
	}
	if ps, ok := pairStatus(p, "c", "shop"); ok {
		t.Errorf("pair (c, shop) after a URL change = %v, want none (fresh)", ps.Breaker.State)
	}
	if p.Exit("gone") != nil {
		t.Errorf("Exit(gone) is still in the pool")
	}

	// Observers: ExitRemoved for every *Exit that left — gone, c's old exit, b's and d's old *Exits.
	removed, changes := rec.take()
	if got, w := removedSet(removed), []string{"b:old", "c:old", "d:old", "gone:old"}; !slices.Equal(got, w) {
		t.Errorf("ExitRemoved heard for %v, want %v", got, w)
	}
	for _, x := range removed {
		if x == a || x == b2 || x == c2 || x == d2 || x == e {
			t.Errorf("ExitRemoved(%v) for an *Exit still in the pool", x)
		}
	}
	// CauseReplaced for c's old breakers that held anything: the exit (parked), the shop pair
	// (OPEN) — not news, whose pair never failed (the park was exit-scoped).
	var got []string
	for _, ch := range changes {
		if ch.Cause != pool.CauseReplaced || ch.To != breaker.Closed || ch.Exit != c2 || ch.Level != 0 || !ch.At.Equal(clk.Now()) {
			t.Errorf("change %+v, want CauseReplaced → closed for the new c at now", ch)
		}
		got = append(got, fmt.Sprintf("%v %s/%s from %v", ch.Scope, ch.Exit.Label(), ch.Origin, ch.From))
	}
	if w := []string{"exit c/ from open", "pair c/shop from open"}; !slices.Equal(got, w) {
		t.Errorf("changes = %q, want %q", got, w)
	}
	if _, ok := pairStatus(p, "gone", "shop"); ok {
		t.Errorf("snapshot lists a pair of the removed exit")
	}
}

// removedSet names the exits heard removed, sorted, each as label:old.
func removedSet(xs []*pool.Exit) []string {
	var out []string
	for _, x := range xs {
		out = append(out, x.Label()+":old")
	}
	slices.Sort(out)
	return out
}

// TestSyncSameListChangesNothing: a list identical to the pool's (new *Exit values) keeps every
// exit and says so, and observers hear nothing.
func TestSyncSameListChangesNothing(t *testing.T) {
	rec := &syncRecorder{}
	a, b := syncExit("a", 1, 0, 1), syncExit("b", 2, 1, 2)
	p, _ := newSyncPool(t, rec, a, b)
	res, err := p.Sync([]*pool.Exit{syncExit("a", 1, 0, 1), syncExit("b", 2, 1, 2)})
	if err != nil || res != (pool.SyncResult{Kept: 2}) || res.Changed() {
		t.Fatalf("Sync(same list) = %+v, %v; want kept 2, unchanged", res, err)
	}
	if p.Exit("a") != a || p.Exit("b") != b {
		t.Errorf("Sync(same list) swapped the pool's *Exits")
	}
	if removed, changes := rec.take(); len(removed)+len(changes) > 0 {
		t.Errorf("observers heard %v and %v, want nothing", removed, changes)
	}
	// A reordered list changes only the order.
	if res, err := p.Sync([]*pool.Exit{syncExit("b", 2, 1, 2), syncExit("a", 1, 0, 1)}); err != nil || res.Changed() {
		t.Fatalf("Sync(reordered) = %+v, %v", res, err)
	}
	if got := labels(p.Exits()); !slices.Equal(got, []string{"b", "a"}) {
		t.Errorf("Exits() after a reordered Sync = %v, want b a", got)
	}
}

// TestSyncBadListChangesNothing: validation is all or nothing, every bad exit is named, and no
// password is shown.
func TestSyncBadListChangesNothing(t *testing.T) {
	rec := &syncRecorder{}
	a := syncExit("a", 1, 0, 1)
	p, _ := newSyncPool(t, rec, a)
	pickVia(t, p, "a", "shop").Report(failVerdict)
	before := p.Snapshot()
	dup := pool.MustParseExit("http://u:hunter2@10.0.0.9:1")
	for i, tc := range []struct {
		list []*pool.Exit
		want []string
	}{
		{[]*pool.Exit{syncExit("x", 9, 0, 1), nil}, []string{"exit 1 is nil"}},
		{[]*pool.Exit{dup, dup.WithTier(1)}, []string{`duplicate exit label "http://u:xxxxx@10.0.0.9:1"`}},
		{[]*pool.Exit{syncExit("w", 8, 0, 1).WithWeight(0), syncExit("a", 1, 0, 1).WithWeight(-1)},
			[]string{"exit w: weight 0", "exit a: weight -1"}},
	} {
		res, err := p.Sync(tc.list)
		if err == nil {
			t.Fatalf("%d: Sync(bad list) = %+v, nil; want an error", i, res)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%d: Sync err = %q, want it to contain %q", i, err, w)
			}
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "secret") {
			t.Errorf("%d: Sync err = %q shows a password", i, err)
		}
		if res != (pool.SyncResult{}) {
			t.Errorf("%d: Sync(bad list) result = %+v, want zero", i, res)
		}
	}
	if got := labels(p.Exits()); !slices.Equal(got, []string{"a"}) || p.Exit("a") != a {
		t.Errorf("after bad Syncs: exits %v, want the pool's a untouched", got)
	}
	if after := p.Snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("snapshot after bad Syncs = %+v, want %+v", after, before)
	}
	if removed, changes := rec.take(); len(removed) > 0 || len(changes) != 1 { // the trip above only
		t.Errorf("observers heard %v and %d changes, want only the trip", removed, len(changes))
	}
	// An empty list is valid: it removes every exit.
	if res, err := p.Sync(nil); err != nil || res != (pool.SyncResult{Removed: 1}) || len(p.Exits()) != 0 {
		t.Errorf("Sync(nil) = %+v, %v with %d exits left; want removed 1, none left", res, err, len(p.Exits()))
	}
}

// TestSyncUpdatedExitKeepsLeasesAndSessions: a lease out on an exit whose weight changes reports
// into the kept breakers, a session pinned to it stays, and observers name the new *Exit.
func TestSyncUpdatedExitKeepsLeasesAndSessions(t *testing.T) {
	rec := &syncRecorder{}
	p, _ := newSyncPool(t, rec, syncExit("a", 1, 0, 1), syncExit("b", 2, 0, 1))
	ctx := context.Background()
	first, err := p.Pick(ctx, pool.Request{Origin: "shop", Session: "cart-7"})
	if err != nil {
		t.Fatal(err)
	}
	label := first.Exit().Label()
	out := pickVia(t, p, label, "news") // out over the Sync
	first.Report(okVerdict)

	a2, b2 := syncExit("a", 1, 0, 5), syncExit("b", 2, 0, 5)
	if res, err := p.Sync([]*pool.Exit{a2, b2}); err != nil || res.Updated != 2 {
		t.Fatalf("Sync(new weights) = %+v, %v; want updated 2", res, err)
	}
	if n := exitStatus(t, p, label).InFlight; n != 1 {
		t.Errorf("in flight on %s after Sync = %d, want the lease still counted (1)", label, n)
	}
	for i := range 5 {
		l, err := p.Pick(ctx, pool.Request{Origin: "shop", Session: "cart-7"})
		if err != nil {
			t.Fatal(err)
		}
		if l.Exit() != p.Exit(label) {
			t.Errorf("pick %d of the session went through %v, want the updated %s", i, l.Exit(), label)
		}
		l.Report(okVerdict)
	}
	rec.take()
	if st := out.Report(failVerdict).PairState; st != breaker.Open {
		t.Errorf("the lease from before Sync tripped pair %v, want open", st)
	}
	if ps, ok := pairStatus(p, label, "news"); !ok || ps.Breaker.State != breaker.Open {
		t.Errorf("pair (%s, news) = %v, want the kept breaker open", label, ps.Breaker.State)
	}
	if n := exitStatus(t, p, label).InFlight; n != 0 {
		t.Errorf("in flight on %s after the report = %d, want 0", label, n)
	}
	_, changes := rec.take()
	if len(changes) != 1 || changes[0].Exit != p.Exit(label) {
		t.Errorf("changes = %+v, want one naming the updated *Exit", changes)
	}
	// Removed after its update, the exit takes the pair made before the update with it.
	rest := a2
	if label == "a" {
		rest = b2
	}
	if res, err := p.Sync([]*pool.Exit{rest}); err != nil || res.Removed != 1 {
		t.Fatalf("Sync(without %s) = %+v, %v; want removed 1", label, res, err)
	}
	if ps, ok := pairStatus(p, label, "news"); ok {
		t.Errorf("pair (%s, news) = %v after the exit was removed, want it gone", label, ps.Breaker.State)
	}
}

// TestSyncReplacedExitIgnoresOldLeases: a lease out on an exit whose URL changes reports into the
// old breakers only: the new exit stays fresh and observers hear nothing of it (a store would
// otherwise write the old proxy's trip under the label).
func TestSyncReplacedExitIgnoresOldLeases(t *testing.T) {
	rec := &syncRecorder{}
	p, _ := newSyncPool(t, rec, syncExit("a", 1, 0, 1))
	out := pickVia(t, p, "a", "shop")
	if res, err := p.Sync([]*pool.Exit{syncExit("a", 2, 0, 1)}); err != nil || res.Replaced != 1 {
		t.Fatalf("Sync(new URL) = %+v, %v; want replaced 1", res, err)
	}
	rec.take()
	out.Report(failVerdict)
	out2 := pickVia(t, p, "a", "shop") // the new exit, not refused
	out2.Release()
	if _, ok := pairStatus(p, "a", "shop"); ok {
		t.Errorf("the old lease's failure shows on the new exit's pair")
	}
	if st := exitStatus(t, p, "a"); st.InFlight != 0 {
		t.Errorf("new exit in flight = %d, want 0", st.InFlight)
	}
	if removed, changes := rec.take(); len(removed)+len(changes) > 0 {
		t.Errorf("observers heard %v and %+v from the old exit's lease, want nothing", removed, changes)
	}
}

// TestSyncTierChangeSteersPicks: moving an exit to a higher tier takes effect at once.
func TestSyncTierChangeSteersPicks(t *testing.T) {
	p, _ := newSyncPool(t, nil, syncExit("a", 1, 0, 1), syncExit("b", 2, 1, 1))
	if l := mustPick(t, p, "shop"); l.Exit().Label() != "a" {
		t.Fatalf("pick = %v, want tier-0 a", l.Exit())
	}
	if _, err := p.Sync([]*pool.Exit{syncExit("a", 1, 2, 1), syncExit("b", 2, 1, 1)}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		l := mustPick(t, p, "shop")
		if l.Exit().Label() != "b" {
			t.Fatalf("pick %d after moving a to tier 2 = %v, want b", i, l.Exit())
		}
		l.Report(okVerdict)
	}
}

// TestSyncStress: Syncs that add, remove, replace and reweight exits race with picks and reports
// from many goroutines (-race). Every lease has an exit, nothing stays in flight, and the pool ends
// with the last list.
func TestSyncStress(t *testing.T) {
	rec := &syncRecorder{}
	lists := [][]*pool.Exit{
		{syncExit("a", 1, 0, 1), syncExit("b", 2, 0, 1), syncExit("c", 3, 1, 1)},
		{syncExit("a", 1, 0, 2), syncExit("b", 20, 0, 1), syncExit("d", 4, 0, 1)},
		{syncExit("a", 1, 1, 2), syncExit("d", 4, 0, 3)},
		{syncExit("b", 2, 0, 1), syncExit("c", 3, 0, 1), syncExit("d", 4, 0, 3)},
	}
	p, _ := newSyncPool(t, rec, lists[0]...)
	ctx := context.Background()
	const workers, picks, syncs = 8, 400, 200
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range picks {
				l, err := p.Pick(ctx, pool.Request{Origin: fmt.Sprintf("o%d", i%3), Session: fmt.Sprintf("s%d", w%2)})
				var nh *pool.NoHealthyExitError
				if errors.As(err, &nh) {
					continue
				}
				if err != nil || l.Exit() == nil {
					errs <- fmt.Errorf("worker %d pick %d: %v, exit %v", w, i, err, l.Exit())
					return
				}
				switch i % 5 {
				case 0:
					l.Report(failVerdict)
				case 1:
					l.Release()
				default:
					l.Report(okVerdict)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range syncs {
			if _, err := p.Sync(lists[i%len(lists)]); err != nil {
				errs <- err
				return
			}
			_ = p.Snapshot()
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	last := lists[(syncs-1)%len(lists)]
	if got := labels(p.Exits()); !slices.Equal(got, labels(last)) {
		t.Errorf("Exits() = %v, want the last list %v", got, labels(last))
	}
	for _, st := range p.Snapshot().Exits {
		if st.InFlight != 0 {
			t.Errorf("exit %s: %d in flight after every lease ended", st.Exit, st.InFlight)
		}
	}
	for _, c := range func() []pool.StateChange { _, ch := rec.take(); return ch }() {
		if c.Exit == nil && c.Scope != pool.ScopeOrigin {
			t.Errorf("a %v change with no exit: %+v", c.Scope, c)
		}
	}
}

// TestSyncComparesDialingURLs: a label keeps its exit when the list names the same proxy in
// another form, and is replaced when anything the proxy is dialled with changes.
func TestSyncComparesDialingURLs(t *testing.T) {
	const was = "http://user:pw@10.0.0.1:3128"
	for _, tc := range []struct {
		now  string
		want pool.SyncResult
	}{
		{"10.0.0.1:3128:user:pw", pool.SyncResult{Kept: 1}},
		{"user:pw@10.0.0.1:3128", pool.SyncResult{Kept: 1}},
		{"HTTP://user:pw@10.0.0.1:3128/", pool.SyncResult{Kept: 1}},
		{"http://user:pw2@10.0.0.1:3128", pool.SyncResult{Replaced: 1}},
		{"http://user2:pw@10.0.0.1:3128", pool.SyncResult{Replaced: 1}},
		{"http://user:@10.0.0.1:3128", pool.SyncResult{Replaced: 1}},
		{"http://user@10.0.0.1:3128", pool.SyncResult{Replaced: 1}},
		{"http://10.0.0.1:3128", pool.SyncResult{Replaced: 1}},
		{"https://user:pw@10.0.0.1:3128", pool.SyncResult{Replaced: 1}},
		{"socks5://user:pw@10.0.0.1:3128", pool.SyncResult{Replaced: 1}},
		{"http://user:pw@10.0.0.1:3129", pool.SyncResult{Replaced: 1}},
		{"http://user:pw@10.0.0.2:3128", pool.SyncResult{Replaced: 1}},
	} {
		p, _ := newSyncPool(t, nil, pool.MustParseExit(was).WithLabel("x"))
		res, err := p.Sync([]*pool.Exit{pool.MustParseExit(tc.now).WithLabel("x")})
		if err != nil || res != tc.want {
			t.Errorf("Sync(%s after %s) = %+v, %v; want %+v", pool.RedactRaw(tc.now), pool.RedactRaw(was), res, err, tc.want)
		}
	}
}

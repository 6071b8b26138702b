// Command reload shows a crawler whose proxy-list file is edited while its requests flow: a
// pool.Reloader notices the new file and syncs the pool with it, and the exits whose lines did not
// change keep their breakers — a pair the site rate-limited stays OPEN with the same window — while
// a proxy whose password was fixed starts afresh and serves again at once.
//
//	proxies.txt ──(Reloader: looks every -interval)──→ Pool.Sync: kept, updated, replaced, added, removed
//	http.Client → transport.Transport → pool.Pool picks an exit → proxytest proxy → shop on 127.0.0.1
//
// Everything runs on 127.0.0.1: six in-process forward proxies and a small shop that answers 429
// (Retry-After: 60) to requests through res-2. Run it with `go run ./examples/reload`; -h lists
// the flags. It takes about two seconds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/examples/internal/cli"
	"github.com/proxybreaker/proxybreaker/examples/internal/tally"
	"github.com/proxybreaker/proxybreaker/examples/internal/world"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

const about = `Starts proxies and a small shop on 127.0.0.1 (nothing leaves the machine) and edits the
crawler's proxy-list file while its requests flow: a pool.Reloader syncs the pool with the new
list, exits whose lines did not change keep their breakers (a pair the shop rate-limited stays
OPEN with the same window), and a proxy whose password was fixed starts afresh and serves at once.`

func main() {
	var cfg config
	cli.Main(command(&cfg), func(ctx context.Context) error { return cli.ErrorOf(run(ctx, os.Stdout, cfg)) })
}

// command is the example's command line, its flags bound to cfg.
func command(cfg *config) *cli.Command { return cli.New("reload", about, cfg.flags) }

// config is what the flags set.
type config struct {
	Requests int
	Interval time.Duration
}

// flags defines the flags that set cfg.
func (cfg *config) flags(fs *flag.FlagSet) {
	fs.IntVar(&cfg.Requests, "requests", 60, "how many requests each phase sends")
	fs.DurationVar(&cfg.Interval, "interval", 50*time.Millisecond, "how often the reloader looks at the list")
}

// result is what a run came to, for the test.
type result struct {
	Reload       pool.SyncResult // the Sync of the edited list
	PairBefore   breaker.Snapshot
	PairAfter    breaker.Snapshot // res-2's pair for the shop, before and after the edit
	SameExit     bool             // dc-1 is the same *pool.Exit before and after
	AuthBefore   breaker.Snapshot
	AuthAfter    breaker.Snapshot // the exit whose password was fixed
	DuringEdit   int              // requests answered while the list was being edited
	After        map[string]int   // requests per proxy after the reload
	FailedAfter  int              // requests after the reload that got an error or no 200
	OriginKey    string
	ReloadErrors []error
}

// The lists before and after the edit; %s are the proxies' URLs.
const (
	listBefore = `# proxies.txt: edited while the crawler runs
%[1]s label=dc-1
%[2]s label=dc-2
%[3]s label=res-2
%[4]s label=auth
%[5]s label=old-1
`
	listAfter = `# proxies.txt: edited while the crawler runs
%[1]s label=dc-1
%[2]s label=dc-2 weight=3
%[3]s label=res-2
%[7]s label=auth
%[6]s label=dc-3
`
)

// run plays the example, printing to out; its requests end when ctx does.
func run(ctx context.Context, out io.Writer, cfg config) (result, error) {
	res := result{After: map[string]int{}}
	if cfg.Requests <= 0 || cfg.Interval <= 0 {
		return res, fmt.Errorf("-requests and -interval must be positive")
	}

	// The shop: it tells which proxy carried each request, and rate-limits res-2.
	w := world.New()
	defer w.Close()
	shop := w.AddSite("shop", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		via, _ := w.Registry.Lookup(r)
		if via == "res-2" {
			rw.Header().Set("Retry-After", "60")
			http.Error(rw, "slow down", http.StatusTooManyRequests)
			return
		}
		fmt.Fprintf(rw, "item via %s", via)
	}))
	exits, err := w.StartExits(
		world.ExitSpec{Name: "dc-1"}, world.ExitSpec{Name: "dc-2"}, world.ExitSpec{Name: "res-2"},
		world.ExitSpec{Name: "auth", User: "crawler", Pass: rightPass, WrongPass: wrongPass},
		world.ExitSpec{Name: "old-1"}, world.ExitSpec{Name: "dc-3"},
	)
	if err != nil {
		return res, err
	}
	// The lists' URLs, %[1]s to %[7]s: each exit's, then auth's proxy with the right password.
	var urls []any
	for _, e := range exits {
		urls = append(urls, e.ProxyURL())
	}
	urls = append(urls, w.Proxy("auth").URLWithCredentials("crawler", rightPass))

	dir, err := os.MkdirTemp("", "proxybreaker-reload")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "proxies.txt")
	if err := writeList(path, fmt.Sprintf(listBefore, urls...)); err != nil {
		return res, err
	}

	// The pool starts empty; the reloader fills it from the file and follows it.
	p, err := pool.New()
	if err != nil {
		return res, err
	}
	defer p.Close()
	changed := make(chan pool.ReloadEvent, 4)
	var (
		mu         sync.Mutex
		reloadErrs []error
	)
	r, err := pool.NewReloader(p, path, pool.ReloadSettings{
		Interval: cfg.Interval,
		OnReload: func(ev pool.ReloadEvent) {
			if ev.Err != nil {
				mu.Lock()
				reloadErrs = append(reloadErrs, ev.Err)
				mu.Unlock()
				fmt.Fprintln(out, "reload failed, the pool keeps its exits:", ev.Err)
				return
			}
			if ev.Result.Changed() {
				select {
				case changed <- ev:
				default: // an edit nobody waits for
				}
			}
		},
	})
	if err != nil {
		return res, err
	}
	loaded, err := r.Reload()
	if err != nil {
		return res, err
	}
	<-changed
	fmt.Fprintf(out, "loaded %s: %s (%s)\n", filepath.Base(path), strings.Join(labelsOf(p), ", "), loaded)
	reloading, cancel := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- r.Run(reloading) }()
	defer func() {
		cancel()
		<-runDone
	}()

	tr, err := transport.New(p)
	if err != nil {
		return res, err
	}
	defer tr.Close()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	// Phase 1: the shop rate-limits res-2, and auth's proxy refuses its password.
	fmt.Fprintln(out, "\n1. requests flow; the shop answers 429 through res-2, auth's proxy answers 407")
	for _, label := range []string{"res-2", "auth"} {
		status, _, err := get(transport.ContextWithExit(ctx, label), client, shop.URL)
		if err != nil {
			return res, err
		}
		fmt.Fprintf(out, "   GET through %s: %d\n", label, status)
	}
	n1 := load(ctx, client, shop.URL, cfg.Requests, 4, nil, nil)
	fmt.Fprintf(out, "   %d more requests: %s\n", total(n1), tally.Line(n1, "%s ×%d"))
	snap := p.Snapshot()
	pair, ok := pairOf(snap, "res-2")
	if !ok {
		return res, errors.New("res-2's pair for the shop has no breaker after a 429")
	}
	res.OriginKey = pair.Origin
	res.PairBefore = pair.Breaker
	res.AuthBefore = exitOf(snap, "auth").Breaker
	dc1 := p.Exit("dc-1")
	fmt.Fprintf(out, "   res-2 × shop: %s, trips %d, probe at +%v\n", pair.Breaker.State, pair.Breaker.Trips, pair.Breaker.NextProbe.Sub(snap.At).Round(time.Second))
	fmt.Fprintf(out, "   auth: %s, parked %v (%s)\n", res.AuthBefore.State, res.AuthBefore.Parked, res.AuthBefore.LastFailure)

	// Phase 2: edit the list while requests flow.
	fmt.Fprintln(out, "\n2. the list is edited while requests flow: dc-2 weight 3, auth's password fixed, dc-3 added, old-1 dropped")
	stop := make(chan struct{})
	during := make(chan map[string]int, 1)
	answered := make(chan struct{})
	go func() { during <- load(ctx, client, shop.URL, maxDuringEdit, 4, stop, answered) }()
	select { // the list is edited while requests flow: once one has been answered
	case <-answered:
	case <-time.After(30 * time.Second):
	}
	if err := writeList(path, fmt.Sprintf(listAfter, urls...)); err != nil {
		close(stop)
		<-during
		return res, err
	}
	var ev pool.ReloadEvent
	select {
	case ev = <-changed:
	case <-time.After(30 * time.Second):
		close(stop)
		<-during
		return res, errors.New("the reloader did not notice the edited list within 30 s")
	}
	close(stop)
	n2 := <-during
	res.Reload = ev.Result
	res.DuringEdit = total(n2)
	fmt.Fprintf(out, "   reloaded: %s\n", ev.Result)
	fmt.Fprintf(out, "   %d requests answered meanwhile: %s\n", total(n2), tally.Line(n2, "%s ×%d"))
	fmt.Fprintf(out, "   exits: %s\n", strings.Join(labelsOf(p), ", "))

	snap = p.Snapshot()
	pair, _ = pairOf(snap, "res-2")
	res.PairAfter = pair.Breaker
	res.AuthAfter = exitOf(snap, "auth").Breaker
	res.SameExit = p.Exit("dc-1") == dc1
	kept := res.PairAfter.State == res.PairBefore.State && res.PairAfter.NextProbe.Equal(res.PairBefore.NextProbe) &&
		res.PairAfter.Trips == res.PairBefore.Trips
	fmt.Fprintf(out, "   res-2 × shop: %s, trips %d, same window: %v  (unchanged line: breaker state kept)\n",
		res.PairAfter.State, res.PairAfter.Trips, kept)
	fmt.Fprintf(out, "   dc-1: the same exit as before: %v\n", res.SameExit)
	fmt.Fprintf(out, "   auth: %s, parked %v  (new password: a new exit, fresh state)\n", res.AuthAfter.State, res.AuthAfter.Parked)

	// Phase 3: the new list serves.
	fmt.Fprintln(out, "\n3. after the reload")
	res.After = load(ctx, client, shop.URL, cfg.Requests, 4, nil, nil)
	for via, n := range res.After {
		if !strings.HasPrefix(via, "200 ") {
			res.FailedAfter += n
		}
	}
	fmt.Fprintf(out, "   %d requests: %s\n", total(res.After), tally.Line(res.After, "%s ×%d"))
	mu.Lock()
	res.ReloadErrors = slices.Clone(reloadErrs)
	mu.Unlock()
	fmt.Fprintln(out, "done")
	return res, nil
}

// auth's password before the edit (wrong: its proxy answers 407) and after (fixed).
const (
	wrongPass = "wrong-pass"
	rightPass = "right-pass"
)

// maxDuringEdit bounds the requests sent while the reloader has not yet noticed the edit.
const maxDuringEdit = 20_000

// writeList writes the list to a temporary file and renames it over path, so that a reload never
// reads half a file.
func writeList(path, text string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// get sends one GET and returns the status and the exit that carried it.
func get(ctx context.Context, c *http.Client, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	via := "?"
	if e := transport.ExitFromResponse(resp); e != nil {
		via = e.Label()
	}
	return resp.StatusCode, via, nil
}

// load sends up to n GETs from workers goroutines, until stop is closed (if not nil) or ctx ends,
// and counts the outcomes as "STATUS via EXIT" or "error". answered, if not nil, is closed once the
// first request has been answered.
func load(ctx context.Context, c *http.Client, url string, n, workers int, stop <-chan struct{}, answered chan<- struct{}) map[string]int {
	var mu sync.Mutex
	var once sync.Once
	counts := map[string]int{}
	var sent sync.WaitGroup
	next := make(chan struct{})
	go func() {
		defer close(next)
		for range n {
			select {
			case next <- struct{}{}:
			case <-stop:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	for range workers {
		sent.Go(func() {
			for range next {
				status, via, err := get(ctx, c, url)
				key := fmt.Sprintf("%d via %s", status, via)
				if err != nil {
					key = "error"
				}
				mu.Lock()
				counts[key]++
				mu.Unlock()
				if answered != nil {
					once.Do(func() { close(answered) })
				}
			}
		})
	}
	sent.Wait()
	return counts
}

func total(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

func labelsOf(p *pool.Pool) []string {
	var out []string
	for _, e := range p.Exits() {
		out = append(out, e.Label())
	}
	return out
}

func pairOf(s pool.Snapshot, exit string) (pool.PairStatus, bool) {
	for _, ps := range s.Pairs {
		if ps.Exit == exit {
			return ps, true
		}
	}
	return pool.PairStatus{}, false
}

func exitOf(s pool.Snapshot, label string) pool.ExitStatus {
	for _, es := range s.Exits {
		if es.Exit == label {
			return es
		}
	}
	return pool.ExitStatus{}
}

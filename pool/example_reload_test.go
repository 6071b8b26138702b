package pool_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// Sync replaces the exit set with a new list, matching exits by label: an unchanged exit keeps
// its breakers (dc-1's rest for shop.example goes on), a new weight keeps them too, a new URL
// under the same label is a new proxy and starts fresh, and labels missing from the list go.
func ExamplePool_Sync() {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p, err := pool.New(
		pool.WithExits(
			pool.MustParseExit("http://user:secret@10.0.0.1:3128").WithLabel("dc-1"),
			pool.MustParseExit("http://user:secret@10.0.0.2:3128").WithLabel("dc-2"),
			pool.MustParseExit("http://user:old-pass@10.0.0.3:3128").WithLabel("dc-3"),
			pool.MustParseExit("http://user:secret@10.0.0.4:3128").WithLabel("dc-4"),
		),
		pool.WithClock(clk),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for _, label := range []string{"dc-1", "dc-3"} { // both get a 429 from shop.example
		l, err := p.Pick(ctx, pool.Request{Origin: "shop.example", Exit: label})
		if err != nil {
			fmt.Println(err)
			return
		}
		l.Report(pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: time.Minute})
	}

	res, err := p.Sync([]*pool.Exit{
		pool.MustParseExit("http://user:secret@10.0.0.1:3128").WithLabel("dc-1"),               // unchanged
		pool.MustParseExit("http://user:secret@10.0.0.2:3128").WithLabel("dc-2").WithWeight(3), // new weight
		pool.MustParseExit("http://user:new-pass@10.0.0.3:3128").WithLabel("dc-3"),             // new password
		pool.MustParseExit("http://user:secret@10.0.0.5:3128").WithLabel("dc-5"),               // new exit
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res)
	for _, ps := range p.Snapshot().Pairs {
		fmt.Println(ps.Exit, ps.Origin, ps.Breaker.State)
	}
	// Output:
	// added 1, removed 1, replaced 1, updated 1, kept 1
	// dc-1 shop.example open
}

// A Reloader follows a proxy-list file: Reload loads it now, Check (what Run does on every tick
// of the pool's clock) loads it again when it changed. A bad file changes nothing, and the
// error says why.
func ExampleReloader() {
	dir, err := os.MkdirTemp("", "proxies")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "proxies.txt")
	write := func(list string) { // a new file renamed over the old one, as a deploy tool would
		err := os.WriteFile(path+".new", []byte(list), 0o600)
		if err == nil {
			err = os.Rename(path+".new", path)
		}
		if err != nil {
			fmt.Println(err)
		}
	}
	write("http://user:secret@10.0.0.1:3128 label=dc-1\nhttp://user:secret@10.0.0.2:3128 label=dc-2\n")

	p, err := pool.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := pool.NewReloader(p, path, pool.ReloadSettings{Interval: 30 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := r.Reload()
	fmt.Println("loaded:", res, err)

	reloaded, _, _ := r.Check()
	fmt.Println("unchanged file reloaded:", reloaded)

	write("http://user:secret@10.0.0.1:3128 label=dc-1\nhttp://user:secret@10.0.0.2:3128 label=dc-2\n" +
		"http://user:secret@10.0.1.1:3128 label=res-1 tier=1\n")
	_, res, err = r.Check()
	fmt.Println("edited:", res, err)

	write("http://user:secret@10.0.0.1:3128 label=dc-1\nhttp://user:secret@10.0.0.2 label=dc-2 weight=-1\n")
	_, _, err = r.Check()
	var re *pool.ReloadError
	if errors.As(err, &re) {
		fmt.Println("bad file:", strings.TrimPrefix(re.Err.Error(), "pool: "))
	}
	fmt.Println(len(p.Exits()), "exits kept")
	// Output:
	// loaded: added 2, removed 0, replaced 0, updated 0, kept 0 <nil>
	// unchanged file reloaded: false
	// edited: added 1, removed 0, replaced 0, updated 0, kept 2 <nil>
	// bad file: proxy list: line 2: proxy dc-2: field 3: weight "-1": want a positive number
	// 3 exits kept
}

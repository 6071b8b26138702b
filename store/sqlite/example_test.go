package sqlitestore_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/store"
	sqlitestore "github.com/proxybreaker/proxybreaker/store/sqlite"
)

// A restart that remembers: the first run parks an exit whose proxy rejects its credentials and
// stops; the second run, a minute later, opens the same file, and the exit is still parked — it
// gets no traffic until its park ends — while the other exit serves.
func Example() {
	dir, err := os.MkdirTemp("", "proxybreaker-state")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state.db")
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx := context.Background()

	// run builds a pool on the state file, as a process does at start.
	run := func() (*pool.Pool, *sqlitestore.Store, error) {
		st, err := sqlitestore.Open(path, sqlitestore.Settings{Clock: clk, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return nil, nil, err
		}
		p, err := store.NewPool(st,
			pool.WithExits(
				pool.MustParseExit("http://user:secret@10.0.0.1:3128").WithLabel("res-1"),
				pool.MustParseExit("http://user:secret@10.0.0.2:3128").WithLabel("res-2"),
			),
			pool.WithClock(clk),
			pool.WithExitSettings(breaker.Settings{ParkFor: time.Hour, Jitter: -1}),
		)
		if err != nil {
			st.Close()
			return nil, nil, err
		}
		return p, st, nil
	}

	// First run: res-2's proxy answers 407.
	p, st, err := run()
	if err != nil {
		fmt.Println(err)
		return
	}
	l, err := p.Pick(ctx, pool.Request{Origin: "shop.example", Exit: "res-2"})
	if err != nil {
		fmt.Println(err)
		return
	}
	after := l.Report(pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth})
	fmt.Println("first run: res-2", after.ExitState)
	if err := st.Close(); err != nil { // commits what is queued, and a final snapshot
		fmt.Println(err)
		return
	}

	// Second run, a minute later, from the same file.
	clk.Advance(time.Minute)
	p, st, err = run()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	for _, e := range p.Snapshot().Exits {
		fmt.Printf("second run: %s %v parked=%v", e.Exit, e.Breaker.State, e.Breaker.Parked)
		if e.Breaker.Parked {
			fmt.Printf(" for another %v", e.Breaker.NextProbe.Sub(clk.Now()))
		}
		fmt.Println()
	}
	for range 3 {
		l, err := p.Pick(ctx, pool.Request{Origin: "shop.example"})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("picked", l.Exit())
		l.Report(pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK})
	}
	// Output:
	// first run: res-2 open
	// second run: res-1 closed parked=false
	// second run: res-2 open parked=true for another 59m0s
	// picked res-1
	// picked res-1
	// picked res-1
}

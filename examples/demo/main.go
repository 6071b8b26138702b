// Command demo shows proxybreaker at work, self-contained on 127.0.0.1: it starts in-process
// forward proxies (healthy ones, one that a site rate-caps, one with a wrong password, a dead one
// and one that hangs) and three small web sites, sends a few hundred requests through a
// transport.Transport over a pool.Pool from several workers, prints the breaker table as it
// changes, and ends with a summary of what the breakers did.
//
//	worker → http.Client → transport.Transport → pool.Pool picks an exit → proxytest proxy → httptest origin
//	                              ↑ pool: breakers per (exit, origin), per exit            │ Registry: which proxy?
//	                              └── Observer (lines, tallies), Pool.Snapshot (table)
//
// Run it with `make demo` or `go run ./examples/demo`; -h lists the flags. A default run takes
// about 30 seconds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/examples/internal/cli"
	"github.com/proxybreaker/proxybreaker/examples/internal/leakwatch"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// config is what the flags set.
type config struct {
	Requests int
	Workers  int
	Duration time.Duration
	Seed     uint64 // 0: pick one
	Quiet    bool   // the summary only
	Color    bool   // colour the states (when stdout is a terminal)
}

// flags defines the flags that set cfg.
func (cfg *config) flags(fs *flag.FlagSet) {
	fs.IntVar(&cfg.Requests, "requests", 400, "how many requests to send; they are paced evenly over most of -duration")
	fs.IntVar(&cfg.Workers, "workers", 8, "how many concurrent workers send them, each with its own http.Client")
	fs.DurationVar(&cfg.Duration, "duration", 35*time.Second, "stop sending after this long, even if requests remain")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "seed for the request mix, exit selection and jitter (0: a random one, printed)")
	fs.BoolVar(&cfg.Quiet, "quiet", false, "print the summary only, not the live table and state changes")
}

// Scaled-down timings, so that breakers open, probe and recover within the demo. The library's
// defaults are breaker.DefaultBaseCooldown (20 s) doubling up to breaker.DefaultMaxCooldown (15 min).
const (
	baseCooldown  = 2 * time.Second
	maxCooldown   = 20 * time.Second
	window        = 10 * time.Second
	parkFor       = 15 * time.Second
	stablePeriod  = 30 * time.Second
	headerTimeout = 800 * time.Millisecond
)

const about = `Starts proxies and web sites on 127.0.0.1 (nothing leaves the machine), sends requests through
proxybreaker's transport, and prints how its circuit breakers take broken exits out and bring
recovered ones back. A default run takes about 30 seconds.`

func main() {
	var cfg config
	cli.Main(command(&cfg), func(ctx context.Context) error {
		cfg.Color = isTerminal(os.Stdout) && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
		return cli.ErrorOf(run(ctx, cfg, os.Stdout))
	})
}

// command is the demo's command line, its flags bound to cfg.
func command(cfg *config) *cli.Command { return cli.New("demo", about, cfg.flags) }

// run is the demo: it builds the world, runs the load, prints as it goes and returns the summary.
// It leaves no goroutine behind.
func run(ctx context.Context, cfg config, stdout io.Writer) (summary, error) {
	if cfg.Requests < 1 || cfg.Workers < 1 || cfg.Duration <= 0 {
		return summary{}, fmt.Errorf("want -requests ≥ 1, -workers ≥ 1 and -duration > 0; got %d, %d, %v",
			cfg.Requests, cfg.Workers, cfg.Duration)
	}
	cfg.Seed = cli.Seed(cfg.Seed)
	out := leakwatch.New(stdout, secrets())
	start := time.Now()
	w, err := startWorld()
	if err != nil {
		return summary{}, err
	}
	rec := newRecorder(start, w.SiteName, !cfg.Quiet, cfg.Color)
	pair, exit := pairSettings(), exitSettings()
	p, err := pool.New(
		pool.WithExits(w.Exits...),
		pool.WithPairSettings(pair),
		pool.WithExitSettings(exit),
		pool.WithSeed(cfg.Seed), // exit selection and every breaker's jitter
	)
	if err != nil {
		return summary{}, errors.Join(err, w.Close())
	}
	// The recorder is also a pool.Observer: transport.New adds it to the pool, so it hears of
	// state changes too, and Close takes it off again.
	tr, err := transport.New(p,
		transport.WithHeaderTimeout(headerTimeout),
		transport.WithBaseTemplate(w.BaseTemplate()),
		transport.WithObserver(rec),
	)
	if err != nil {
		return summary{}, errors.Join(err, w.Close())
	}

	st := newLoadStats()
	var disp *display
	if !cfg.Quiet {
		if err := printIntro(out, cfg, w, pair, exit); err != nil {
			tr.Close()
			return summary{}, errors.Join(err, w.Close())
		}
		disp = startDisplay(out, w, tr.Pool(), rec, st, cfg.Requests, start, cfg.Color)
	}
	st.run(ctx, cfg, w, tr, rec, cfg.Seed)
	if disp != nil {
		disp.close()
	}
	tr.Close()
	closeErr := w.Close()

	sum := buildSummary(w, rec, st)
	sum.Seed, sum.Interrupted = cfg.Seed, ctx.Err() != nil
	sum.Elapsed = time.Since(start)
	printSummary(out, sum)
	sum.Lines, sum.Leaks = out.Counts()
	return sum, closeErr
}

// pairSettings are the per-(exit, origin) breakers' settings, scaled down for the demo. Their
// jitter draws from the pool's seeded source (pool.WithSeed).
func pairSettings() breaker.Settings {
	return breaker.Settings{
		BaseCooldown: baseCooldown, MaxCooldown: maxCooldown, Window: window,
		ParkFor: parkFor, StablePeriod: stablePeriod,
	}
}

// exitSettings are each exit's own breaker's settings: pool.DefaultExitSettings, scaled down.
func exitSettings() breaker.Settings {
	s := pool.DefaultExitSettings()
	s.BaseCooldown, s.MaxCooldown, s.Window = baseCooldown, maxCooldown, window
	s.ParkFor, s.StablePeriod = parkFor, stablePeriod
	return s
}

// printIntro describes the exits, the origins and the breaker settings, with the defaults filled in.
func printIntro(out io.Writer, cfg config, w *scene, pair, exit breaker.Settings) error {
	pp, err := breaker.NewPolicy(pair)
	if err != nil {
		return err
	}
	ep, err := breaker.NewPolicy(exit)
	if err != nil {
		return err
	}
	p, e := pp.Settings(), ep.Settings()
	var b strings.Builder
	fmt.Fprintf(&b, "proxybreaker demo: %d exits, %d origins, %d requests from %d workers over at most %v, all on 127.0.0.1 (seed %d)\n\n",
		len(w.Exits), len(w.origins), cfg.Requests, cfg.Workers, cfg.Duration, cfg.Seed)
	fmt.Fprintf(&b, "Exits: the label names an exit everywhere; the URL is how the library prints an unlabelled exit.\n")
	for i, e := range w.Exits {
		fmt.Fprintf(&b, "  %-*s tier %d  %-37s %s\n", exitCol, e.Label(), e.Tier(), e.WithLabel("").Label(), exitSpecs[i].Role)
	}
	fmt.Fprintf(&b, "  Tier 0 is preferred; a tier-1 exit serves an origin only while no tier-0 exit is ready for it.\n\n")
	fmt.Fprintf(&b, "Origins (each one learns from the proxies' shared Registry which proxy carried a request):\n")
	for _, o := range w.origins {
		extra := ""
		if o.cap != nil {
			extra = "; rate-caps " + o.cap.proxy
		}
		fmt.Fprintf(&b, "  %-5s %-24s %s%s\n", o.Name, o.URL, o.proto, extra)
	}
	fmt.Fprintf(&b, "\nBreaker timings are scaled down from the defaults (%v first cooldown, doubling up to %v) so recovery fits in the demo:\n",
		breaker.DefaultBaseCooldown, fmtDur(breaker.DefaultMaxCooldown))
	fmt.Fprintf(&b, "  pair breaker, one per exit × origin:\n")
	fmt.Fprintf(&b, "      trips on %d failures within %v, or at once on a 429 with Retry-After (then OPEN for that long, without climbing);\n",
		p.FailureThreshold, p.Window)
	fmt.Fprintf(&b, "      OPEN %v, doubling on each failed probe up to %v, plus up to %.0f%% jitter; the level decays after %v closed\n",
		p.BaseCooldown, p.MaxCooldown, p.Jitter*100, p.StablePeriod)
	fmt.Fprintf(&b, "  exit breaker, one per exit, for trouble that is not about one origin:\n")
	fmt.Fprintf(&b, "      PARKED for %v by a 407, a refused connection or a proxy DNS failure, for every origin at once;\n", e.ParkFor)
	fmt.Fprintf(&b, "      trips when timeouts and resets, counted across all origins, reach %d within %v (and %.0f%% once it has seen %d attempts)\n",
		e.FailureThreshold, e.Window, e.FailureRatio*100, e.MinVolume)
	fmt.Fprintf(&b, "  header timeout %v (default %v): a proxy that accepts and never answers is blamed for a timeout\n\n",
		headerTimeout, transport.DefaultHeaderTimeout)
	fmt.Fprintf(&b, "The table has one row per exit. Each origin column is that exit's pair breaker for the origin; · means the pool\n")
	fmt.Fprintf(&b, "holds no breaker for the pair (it has not failed yet), which counts as closed. \"exit breaker\" is the exit's own;\n")
	fmt.Fprintf(&b, "trips counts how often any of them opened; ok and failed count attempts through the exit.\n")
	fmt.Fprintf(&b, "An exit takes a request for an origin only when neither breaker is OPEN; OPEN and PARKED show the time to the next probe.\n")
	fmt.Fprintf(&b, "When that time is up the cell says \"probe due\": the next request the exit is picked for goes as the probe, and\n")
	fmt.Fprintf(&b, "\"half-open\" is shown while that probe is out; a line says when it goes, and another when it reheats the breaker.\n")
	fmt.Fprintf(&b, "A line is printed for each state change as it happens; the table is reprinted when a state has changed.\n\n")
	_, err = io.WriteString(out, b.String())
	return err
}

// isTerminal reports whether f is a terminal (a character device), where colour is welcome.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// fmtDur prints whole minutes as "15m" rather than "15m0s".
func fmtDur(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

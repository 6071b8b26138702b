// Command browser drives headless Chromium through proxybreaker's engine, self-contained on
// 127.0.0.1: a browser cannot use an http.RoundTripper, so each navigation picks an exit from a
// pool.Pool itself, opens a fresh browser context whose proxy is that exit (answering the proxy's
// credential challenge through the DevTools Fetch domain), navigates, judges the main document —
// its status, its headers, and whether it is a challenge page — and reports the verdict on the lease.
//
//	page → Navigator.Navigate → pool.Pool.Pick → lease on an exit
//	     → Chromium browser context (proxy = the exit) → proxytest proxy → httptest site
//	     → main document: status, headers, first bytes → transport.DefaultClassifier → Lease.Report
//
// The world: three sites (news; api, which answers 429 with a Retry-After once an exit has used its
// budget; shop, which answers the first exit it sees with a Cloudflare-like challenge) and five
// exits (dc-1; dc-2 and dc-3 with credentials; auth-bad, whose password is wrong; dead, where
// nothing listens). Navigations that fail are retried through another exit, as a scraper would.
//
// It needs Chromium: Debian's chromium package (/usr/bin/chromium), or -chromium PATH.
// Run it with `go run ./examples/browser`; -h lists the flags. A run takes about 30 seconds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/proxybreaker/proxybreaker/examples/internal/cli"
	"github.com/proxybreaker/proxybreaker/examples/internal/leakwatch"
	"github.com/proxybreaker/proxybreaker/pool"
)

// config is what the flags set.
type config struct {
	Rounds   int           // each round visits one page of every site
	Attempts int           // per page, through different exits
	Seed     uint64        // 0: pick one
	Chromium string        // the browser binary; "" finds it
	Timeout  time.Duration // per navigation
}

// flags defines the flags that set cfg.
func (cfg *config) flags(fs *flag.FlagSet) {
	fs.IntVar(&cfg.Rounds, "rounds", 8, "how many rounds; each visits one page of every site")
	fs.IntVar(&cfg.Attempts, "attempts", 3, "attempts per page, each through another exit, before giving up")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "seed for the pool's choices (0: a random one, printed)")
	fs.StringVar(&cfg.Chromium, "chromium", "", "Chromium binary (default: /usr/bin/chromium, else chromium or google-chrome on $PATH)")
	fs.DurationVar(&cfg.Timeout, "timeout", DefaultNavigationTimeout, "bound on each navigation; an exit that takes longer is blamed")
}

// browserStartTimeout bounds how long Chromium may take to start and answer.
const browserStartTimeout = 30 * time.Second

const about = `Starts proxies and web sites on 127.0.0.1 (nothing leaves the machine) and visits the sites with
headless Chromium, each navigation in a browser context whose proxy is the exit proxybreaker's
pool picked; the verdict of each navigation goes back to the pool's breakers. It needs Chromium.`

func main() {
	var cfg config
	cli.Main(command(&cfg), func(ctx context.Context) error { return cli.ErrorOf(run(ctx, cfg, os.Stdout)) })
}

// command is the example's command line, its flags bound to cfg.
func command(cfg *config) *cli.Command { return cli.New("browser", about, cfg.flags) }

// visit is one page the example visited: the attempts it took, and why it gave up if it did.
type visit struct {
	N        int
	Site     string // the site's name
	Path     string
	Attempts []Result
	Err      error // the pool's refusal, when it refused an attempt; nil otherwise
	Loaded   bool  // the last attempt's verdict was a success
}

// summary is what a run came to.
type summary struct {
	Seed       uint64
	Browser    string
	Visits     []visit
	Snapshot   pool.Snapshot
	Names      map[string]string // site name by origin key
	Challenged string            // the exit shop challenged
	Direct     int               // requests that reached a site through no exit
	Lines      int               // lines printed
	Leaks      int               // printed lines that held a password
	Took       time.Duration
}

// run is the example: it builds the world, starts the browser, visits the sites and prints as it
// goes. It stops everything it started before it returns. An error wrapping errNoChromium means
// no browser was found.
func run(ctx context.Context, cfg config, stdout io.Writer) (summary, error) {
	if cfg.Rounds < 1 || cfg.Attempts < 1 || cfg.Timeout <= 0 {
		return summary{}, fmt.Errorf("want -rounds ≥ 1, -attempts ≥ 1 and -timeout > 0; got %d, %d, %v",
			cfg.Rounds, cfg.Attempts, cfg.Timeout)
	}
	cfg.Seed = cli.Seed(cfg.Seed)
	execPath, err := findChromium(cfg.Chromium)
	if err != nil {
		return summary{}, err
	}
	start := time.Now()
	out := leakwatch.New(stdout, secrets())
	w, err := startWorld()
	if err != nil {
		return summary{}, err
	}
	defer w.Close()
	b, err := startBrowser(ctx, execPath, browserStartTimeout)
	if err != nil {
		return summary{}, err
	}
	defer b.stop()

	p, err := pool.New(
		pool.WithExits(w.Exits...),
		pool.WithSeed(cfg.Seed), // the same picks on every run with this seed
		pool.WithInlineSweep(),
	)
	if err != nil {
		return summary{}, err
	}
	defer p.Close()
	nav, err := NewNavigator(p, b.ctx, NavigatorConfig{Timeout: cfg.Timeout})
	if err != nil {
		return summary{}, err
	}

	s := summary{Seed: cfg.Seed, Browser: b.version, Names: map[string]string{}}
	for _, o := range w.origins {
		s.Names[o.Key] = o.Name
	}
	printIntro(out, s, execPath, w, cfg)
	for r := 1; r <= cfg.Rounds && ctx.Err() == nil; r++ {
		for _, o := range w.origins {
			if ctx.Err() != nil {
				break
			}
			v, err := visitPage(ctx, nav, o, pagePath(o.Name, r), cfg.Attempts, len(s.Visits)+1, out)
			if err != nil {
				return s, err
			}
			s.Visits = append(s.Visits, v)
		}
	}
	s.Snapshot = p.Snapshot()
	s.Challenged, s.Direct = w.challengedProxy(), w.directRequests()
	printCarried(out, s, w)
	printBreakers(out, s)
	s.Took = time.Since(start)
	fmt.Fprintf(out, "\n%d pages in %v; %d request(s) reached a site without an exit.\n",
		len(s.Visits), s.Took.Round(100*time.Millisecond), s.Direct)
	s.Lines, s.Leaks = out.Counts()
	if ctx.Err() != nil {
		return s, ctx.Err()
	}
	return s, nil
}

// pagePath is the page the example visits on a site in round r.
func pagePath(site string, r int) string {
	switch site {
	case "news":
		return fmt.Sprintf("/story/%d", r)
	case "api":
		return fmt.Sprintf("/v1/items?page=%d", r)
	}
	return fmt.Sprintf("/product/%d", r)
}

// visitPage navigates to one page, through another exit after each failed attempt, as a scraper
// retries: one pool.Retries for the page makes each pick avoid the exits that failed it. It stops
// at the first attempt that is not a failure, or when the pool refuses (a scraper would wait for the
// refusal's RetryIn). Its error is the browser's failure, which ends the example.
func visitPage(ctx context.Context, nav *Navigator, o *origin, path string, attempts, n int, out io.Writer) (visit, error) {
	v := visit{N: n, Site: o.Name, Path: path}
	retries := pool.NewRetries()
	for i := 0; i < attempts; i++ {
		res, err := nav.Navigate(ctx, o.URL+path, retries)
		if err != nil {
			if refused(err) {
				v.Err = err
				printAttempt(out, v, i, res)
				return v, nil
			}
			if ctx.Err() != nil {
				return v, nil
			}
			return v, err
		}
		v.Attempts = append(v.Attempts, res)
		printAttempt(out, v, i, res)
		if o := res.Verdict.Outcome; o == pool.Success || o == pool.Neutral {
			v.Loaded = o == pool.Success
			return v, nil
		}
	}
	return v, nil
}

// refused reports whether err is the pool refusing a pick.
func refused(err error) bool {
	return errors.Is(err, pool.ErrNoHealthyExit) || errors.Is(err, pool.ErrOriginUnhealthy) ||
		errors.Is(err, pool.ErrThrottled)
}

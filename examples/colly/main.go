// Command colly crawls a small web site with a Colly collector through proxybreaker's transport,
// self-contained on 127.0.0.1: it starts in-process forward proxies — three healthy ones, one
// whose password is wrong (407), a dead one, one that hangs, one the site rate-limits (429) and
// one the site answers with a challenge page — and a site of linked pages, then crawls it with
// collyext attached and RetryOnError re-queueing failures on other exits. It prints the breakers'
// state changes as they happen, and a summary: every page loaded once, which exit carried what.
//
//	colly.Collector → collyext (id, *pool.Retries, exit, re-queue) → transport.Transport
//	    → pool.Pool picks an exit → proxytest proxy → site
//
// Run it with `go run ./examples/colly`; -h lists the flags. A run takes about three seconds.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/proxybreaker/proxybreaker/collyext"
	"github.com/proxybreaker/proxybreaker/examples/internal/cli"
	"github.com/proxybreaker/proxybreaker/examples/internal/tally"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// config is what the flags set.
type config struct {
	Pages int
	Sync  bool
	Quiet bool // the summary only
}

// flags defines the flags that set cfg.
func (cfg *config) flags(fs *flag.FlagSet) {
	fs.IntVar(&cfg.Pages, "pages", 60, "how many linked pages the site has")
	fs.BoolVar(&cfg.Sync, "sync", false, "crawl with a sync collector (default: async, 6 requests in flight)")
	fs.BoolVar(&cfg.Quiet, "quiet", false, "print the summary only, not the breakers' state changes")
}

// headerTimeout is how long an exit may take to answer before it is blamed: short, so that the
// hanging exit is caught quickly.
const headerTimeout = 500 * time.Millisecond

const about = `Starts proxies and a web site on 127.0.0.1 (nothing leaves the machine) and crawls the site with
a Colly collector through proxybreaker: broken exits are taken out, failed pages re-queued through
healthy ones, and every response names the exit that carried it.`

func main() {
	var cfg config
	cli.Main(command(&cfg), func(ctx context.Context) error { return cli.ErrorOf(run(ctx, cfg, os.Stdout)) })
}

// command is the example's command line, its flags bound to cfg.
func command(cfg *config) *cli.Command { return cli.New("colly", about, cfg.flags) }

// summary is what a crawl came to.
type summary struct {
	Pages    int            // pages the site has
	Loaded   map[string]int // OnResponse calls per page path
	ByExit   map[string]int // pages per exit that carried them
	Lost     []string       // requests given up
	Attempts int            // attempts the transport made
	Failures map[string]int // failed attempts per "exit class"
	Parked   []string       // exits parked at the end
}

func run(ctx context.Context, cfg config, out io.Writer) (summary, error) {
	if cfg.Pages < 1 {
		return summary{}, fmt.Errorf("-pages %d: want at least 1", cfg.Pages)
	}
	w, site, err := startWorld(cfg.Pages)
	if err != nil {
		return summary{}, err
	}
	defer w.Close()

	pl, err := pool.New(pool.WithExits(w.Exits...))
	if err != nil {
		return summary{}, err
	}
	p := &printer{out: out, quiet: cfg.Quiet, failures: map[string]int{}}
	// p is a transport.Observer (attempts) and a pool.Observer (state changes): WithObserver plugs
	// it into both, and Close takes it off the pool again.
	tr, err := transport.New(pl,
		transport.WithHeaderTimeout(headerTimeout),
		transport.WithObserver(p),
	)
	if err != nil {
		return summary{}, err
	}
	defer tr.Close()

	c := colly.NewCollector(colly.Async(!cfg.Sync), colly.StdlibContext(ctx))
	// The LimitRule bounds concurrency only; pacing belongs to the transport's buckets (see the
	// collyext documentation).
	if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: 6}); err != nil {
		return summary{}, err
	}
	// Five of the eight exits are bad on purpose: a page may be re-queued through every other
	// exit before it is given up (the default, collyext.DefaultRetries, is four re-queues, and a
	// first page that drew the five bad exits in a row was lost one run in fifty).
	ext, err := collyext.Attach(c, tr, collyext.Settings{Retries: len(exitSpecs) - 1})
	if err != nil {
		return summary{}, err
	}
	s := summary{Pages: cfg.Pages, Loaded: map[string]int{}, ByExit: map[string]int{}}
	var mu sync.Mutex
	c.OnHTML("a[href]", func(e *colly.HTMLElement) { e.Request.Visit(e.Attr("href")) })
	c.OnResponse(func(r *colly.Response) {
		mu.Lock()
		s.Loaded[r.Request.URL.Path]++
		s.ByExit[collyext.Exit(r)]++
		mu.Unlock()
	})
	c.OnError(ext.RetryOnError(func(r *colly.Response, err error) {
		mu.Lock()
		s.Lost = append(s.Lost, fmt.Sprintf("%s: %v", r.Request.URL.Path, err))
		mu.Unlock()
	}))

	fmt.Fprintf(out, "site %s: %d linked pages\n", site.URL, cfg.Pages)
	fmt.Fprintln(out, "exits:")
	for _, sp := range exitSpecs {
		fmt.Fprintf(out, "  %-11s %s\n", sp.Name, sp.Role)
	}
	mode := "async, 6 in flight"
	if cfg.Sync {
		mode = "sync"
	}
	fmt.Fprintf(out, "crawling (%s, header timeout %v)\n", mode, headerTimeout)
	start := time.Now()
	if err := c.Visit(site.URL + "/page/0"); err != nil && !cfg.Sync {
		return s, err
	}
	// A sync collector's Visit returns the first fetch's error even when a re-queue loaded the
	// page; the callbacks tell.
	c.Wait()
	took := time.Since(start)

	s.Attempts, s.Failures = p.totals()
	for _, e := range tr.Pool().Snapshot().Exits {
		if e.Breaker.Parked {
			s.Parked = append(s.Parked, e.Exit)
		}
	}
	printSummary(out, s, took)
	if ctx.Err() != nil {
		return s, ctx.Err()
	}
	return s, nil
}

func printSummary(out io.Writer, s summary, took time.Duration) {
	loadedOnce := 0
	for _, n := range s.Loaded {
		if n == 1 {
			loadedOnce++
		}
	}
	fmt.Fprintf(out, "\ndone in %v: %d of %d pages loaded once each, %d lost; %d attempts for them\n",
		took.Round(time.Millisecond), loadedOnce, s.Pages, len(s.Lost), s.Attempts)
	fmt.Fprintf(out, "pages by exit:      %s\n", tally.Line(s.ByExit, "%s %d"))
	fmt.Fprintf(out, "failures by exit:   %s\n", tally.Line(s.Failures, "%s %d"))
	if len(s.Parked) > 0 {
		fmt.Fprintf(out, "parked exits:       %s\n", strings.Join(s.Parked, ", "))
	}
	for _, l := range s.Lost {
		fmt.Fprintf(out, "lost: %s\n", l)
	}
}

// printer observes the transport's attempts, which it counts, and the pool's breakers, whose state
// changes it prints.
type printer struct {
	transport.NopObserver
	out   io.Writer
	quiet bool

	mu       sync.Mutex
	attempts int
	failures map[string]int
}

func (p *printer) AttemptFinished(_ context.Context, r transport.AttemptResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attempts++
	if r.Verdict.Outcome == pool.Transient || r.Verdict.Outcome == pool.Permanent {
		p.failures[r.Exit.Label()+" "+string(r.Verdict.Class)]++
	}
}

func (p *printer) StateChanged(c pool.StateChange) {
	if p.quiet {
		return
	}
	what := "exit " + c.Exit.Label()
	switch c.Scope {
	case pool.ScopePair:
		what = fmt.Sprintf("pair %s × %s", c.Exit.Label(), c.Origin)
	case pool.ScopeOrigin:
		what = "origin " + c.Origin
	}
	detail := ""
	if !c.NextProbe.IsZero() {
		detail = fmt.Sprintf(" for %v", c.NextProbe.Sub(c.At).Round(100*time.Millisecond))
	}
	if c.Parked {
		detail += ", parked"
	}
	if c.Reason != "" {
		detail += ": " + c.Reason
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, "  %-40s %s → %s%s\n", what, c.From, c.To, detail)
}

func (p *printer) totals() (int, map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]int, len(p.failures))
	for k, v := range p.failures {
		m[k] = v
	}
	return p.attempts, m
}

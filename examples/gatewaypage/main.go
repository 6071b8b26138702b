// Command gatewaypage serves the status page of a pool that holds a provider gateway beside two
// static proxies, after some traffic: the page's Gateways section shows the gateway with its live
// sessions by label (res#1…; never a minted session id, never a password) and the session a site
// banned replaced by a fresh one. docs/status-gateways.png is a screenshot of it.
//
//	http.Client → transport.Transport → pool.Pool → proxytest.Gateway (res, sessions=4: a 127.0.0.x
//	                                        │          source address per session) → shop on 127.0.0.1
//	                                        └────────→ proxytest proxies dc-1, dc-2 ──────↗
//	statuspage.Handler(pool) on 127.0.0.1 ← a browser
//
// Run it with `go run ./examples/gatewaypage` and open the URL it prints; it serves until
// interrupted (or for -serve). Nothing leaves the machine.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/proxybreaker/proxybreaker/examples/internal/cli"
	"github.com/proxybreaker/proxybreaker/examples/internal/world"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/statuspage"
	"github.com/proxybreaker/proxybreaker/transport"
)

const about = `Starts a provider-like gateway (4 sessions, each leaving from its own 127.0.0.x address),
two static proxies and a small shop on 127.0.0.1 (nothing leaves the machine), sends requests
through a pool of them — three caller sessions and some pinned to the static exits — has the shop
ban the address of one caller session's gateway session, so that the gateway replaces it, and
serves the pool's status page, whose Gateways section shows the gateway with its live sessions.`

// gwPass is the gateway account's password: the page and the output never show it.
const gwPass = "gw-secret-pw"

func main() {
	var cfg config
	cli.Main(command(&cfg), func(ctx context.Context) error { return cli.ErrorOf(run(ctx, os.Stdout, cfg)) })
}

// command is the example's command line, its flags bound to cfg.
func command(cfg *config) *cli.Command { return cli.New("gatewaypage", about, cfg.flags) }

// config is what the flags set.
type config struct {
	Addr     string
	Requests int
	Serve    time.Duration // 0: until interrupted
}

// flags defines the flags that set cfg.
func (cfg *config) flags(fs *flag.FlagSet) {
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:0", "where the status page listens (a loopback address)")
	fs.IntVar(&cfg.Requests, "requests", 8, "how many requests each caller session sends before the ban")
	fs.DurationVar(&cfg.Serve, "serve", 0, "stop serving the page after this long (0: until interrupted)")
}

// result is what a run came to, for the example's test.
type result struct {
	Snapshot       pool.Snapshot
	Page           string // the status page as served
	Before, After  netip.Addr
	Moved          bool // the banned caller session's next lease said SessionMoved
	Banned, Served int  // the shop's blocks, and requests it served
}

// run builds the world, sends the traffic, and serves the page until ctx ends or cfg.Serve passes.
func run(ctx context.Context, out io.Writer, cfg config) (res result, err error) {
	w := world.New()
	defer w.Close()
	shop := &proxytest.BanOrigin{}
	site := w.AddSite("shop", shop)
	static, err := w.StartExits(world.ExitSpec{Name: "dc-1", Tier: 1}, world.ExitSpec{Name: "dc-2", Tier: 1})
	if err != nil {
		return res, err
	}
	gw, err := proxytest.StartGateway(proxytest.GatewayConfig{Name: "res", User: "acct", Pass: gwPass, Registry: w.Registry})
	if err != nil {
		return res, err
	}
	defer gw.Close()
	exits, err := pool.ReadExits(strings.NewReader(gw.Template() + " label=res sessions=4"))
	if err != nil {
		return res, err
	}
	moves := &moveRecorder{}
	p, err := pool.New(pool.WithExits(append(exits, static...)...), pool.WithSeed(11))
	if err != nil {
		return res, err
	}
	tr, err := transport.New(p, transport.WithBaseTemplate(w.BaseTemplate()), transport.WithObserver(moves))
	if err != nil {
		return res, err
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}

	// Three caller sessions (on the gateway, tier 0, while it serves), and requests pinned to
	// each static exit (tier 1, the fallback).
	for i := range cfg.Requests {
		for _, s := range []string{"cart-1", "cart-2", "checkout"} {
			get(transport.ContextWithSession(ctx, s), client, site.URL)
		}
		get(transport.ContextWithExit(ctx, static[i%2].Label()), client, site.URL)
	}
	// The shop bans the address checkout leaves from, its gateway session's: checkout's next
	// request is blocked, the gateway replaces the session, and checkout follows it to the new one.
	checkout := transport.ContextWithSession(ctx, "checkout")
	res.Before, _ = get(checkout, client, site.URL)
	shop.Ban(res.Before)
	get(checkout, client, site.URL)
	moves.watch()
	res.After, _ = get(checkout, client, site.URL)
	res.Moved = moves.moved()
	res.Banned, res.Served = shop.Blocks(), len(shop.Addrs())
	fmt.Fprintf(out, "checkout left from %v, was banned there, and now leaves from %v (moved: %v)\n", res.Before, res.After, res.Moved)

	page, err := statuspage.New(p, statuspage.WithTitle("gatewaypage"))
	if err != nil {
		return res, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return res, err
	}
	srv := &http.Server{Handler: page, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/"
	if res.Page, err = fetch(ctx, url); err != nil {
		return res, err
	}
	res.Snapshot = p.Snapshot()
	fmt.Fprintf(out, "status page: %s\n", url)
	wait := ctx.Done()
	if cfg.Serve > 0 {
		t := time.NewTimer(cfg.Serve)
		defer t.Stop()
		select {
		case <-wait:
		case <-t.C:
		}
		return res, nil
	}
	<-wait
	return res, nil
}

// get sends one GET with ctx's session or exit and returns the address the shop saw (its body).
func get(ctx context.Context, c *http.Client, url string) (netip.Addr, int) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return netip.Addr{}, 0
	}
	resp, err := c.Do(req)
	if err != nil {
		return netip.Addr{}, 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	a, _ := netip.ParseAddr(strings.TrimSpace(string(body)))
	return a, resp.StatusCode
}

// fetch returns the page at url.
func fetch(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	c := &http.Client{}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", errors.New("status page: " + resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// moveRecorder notes whether an attempt after watch said its session moved.
type moveRecorder struct {
	pool.NopObserver
	mu       sync.Mutex
	watching bool
	sawMove  bool
}

func (m *moveRecorder) AttemptStarted(ctx context.Context, a transport.AttemptInfo) context.Context {
	m.mu.Lock()
	m.sawMove = m.sawMove || (m.watching && a.SessionMoved)
	m.mu.Unlock()
	return ctx
}
func (m *moveRecorder) AttemptFinished(context.Context, transport.AttemptResult) {}
func (m *moveRecorder) watch()                                                   { m.mu.Lock(); m.watching = true; m.mu.Unlock() }
func (m *moveRecorder) moved() bool                                              { m.mu.Lock(); defer m.mu.Unlock(); return m.sawMove }

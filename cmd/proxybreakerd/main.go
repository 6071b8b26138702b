// Command proxybreakerd is proxybreaker's judgement as a local proxy that any client can point
// at — curl, Scrapy, requests, a browser — over a proxy list, with breakers per (exit, site). One
// port serves plain HTTP, CONNECT and SOCKS5 (package proxyd); the admin port serves metrics,
// health, the status page and the report API. `proxybreakerd -h` lists every setting;
// docs/daemon.md is the operator's guide.
//
//	proxybreakerd -proxies proxies.txt [-state state.db | -redis redis://host:6379/0]
//
// Exit codes: 0 after a clean shutdown, 1 when draining ran past -shutdown-timeout or serving
// failed, 64 bad usage, 66 a file that cannot be read, 65 a bad proxy list or credentials file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/proxyd"
	"github.com/proxybreaker/proxybreaker/store"
	redisstore "github.com/proxybreaker/proxybreaker/store/redis"
	sqlitestore "github.com/proxybreaker/proxybreaker/store/sqlite"
)

// Exit codes (sysexits.h beyond 0 and 1).
const (
	exitFailed  = 1
	exitData    = 65
	exitNoInput = 66
	exitUsage   = 64
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr, hup, nil)
	stop()
	os.Exit(code)
}

// started, when not nil, is told the addresses the daemon listens on once it serves (tests): the
// proxy port first, then the profile listeners in the order given, and the admin port ("" for none).
type started func(proxies []string, admin string)

// run is the command; it returns the exit code.
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer, hup <-chan os.Signal, onStart started) int {
	o, fs, err := parseFlags(args, lookup)
	if errors.Is(err, flag.ErrHelp) {
		usage(stdout, fs)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "proxybreakerd: %v\n", err)
		return exitUsage
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		fmt.Fprintf(stderr, "proxybreakerd: -log-level %q: want debug, info, warn or error\n", o.logLevel)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	d, code := setup(o, log)
	if d == nil {
		return code
	}
	return d.serve(ctx, o, log, hup, onStart)
}

// daemon is what setup built.
type daemon struct {
	s        *proxyd.Server
	tel      *proxyd.Telemetry
	reloader *pool.Reloader
	st       store.Store
	cfg      proxyd.Config
	loaded   atomic.Bool
}

// setup reads the files and builds the pool, the store and the server.
func setup(o *options, log *slog.Logger) (*daemon, int) {
	fail := func(code int, format string, args ...any) (*daemon, int) {
		log.Error("proxybreakerd: " + fmt.Sprintf(format, args...))
		return nil, code
	}
	if o.proxies == "" {
		return fail(exitUsage, "-proxies FILE is required (see -h)")
	}
	if o.state != "" && o.redis != "" {
		return fail(exitUsage, "-state and -redis: choose one")
	}
	cfg := proxyd.Config{
		AllowPrivate: o.allowPrivate, MaxConns: o.maxConns, MaxHeaderBytes: o.maxHeader,
		HeaderTimeout: o.headerTO, IdleTimeout: o.idleTO, HandshakeTimeout: o.handshakeTO,
		FirstByteTimeout: o.firstByteTO, TunnelIdleTimeout: o.tunnelIdleTO, Logger: log,
	}
	var err error
	if o.credentials != "" {
		if cfg.Credentials, err = readCredentials(o.credentials); err != nil {
			return fail(exitData, "%v", err)
		}
	}
	if cfg.Allow, err = parseAllow(o.allow); err != nil {
		return fail(exitUsage, "-%v", err)
	}
	if err := cfg.CheckListen(o.listen); err != nil {
		return fail(exitUsage, "-listen: %v", err)
	}
	for _, p := range o.profiles {
		addr, _, _ := strings.Cut(p, "=")
		if err := cfg.CheckListen(addr); err != nil {
			return fail(exitUsage, "-profile: %v", err)
		}
	}
	f, err := os.Open(o.proxies)
	if err != nil {
		return fail(exitNoInput, "-proxies: %v", err)
	}
	exits, err := pool.ReadExits(f)
	f.Close()
	if err != nil {
		return fail(exitData, "-proxies %s: %v", o.proxies, err)
	}
	d := &daemon{cfg: cfg}
	switch {
	case o.state != "":
		if d.st, err = sqlitestore.Open(o.state, sqlitestore.Settings{Logger: log}); err != nil {
			return fail(exitNoInput, "-state: %v", err)
		}
	case o.redis != "":
		c, err := redisClient(o.redis, o.redisCluster)
		if err != nil {
			return fail(exitUsage, "-redis: %v", err)
		}
		if d.st, err = redisstore.New(c, redisstore.Settings{Namespace: o.redisNS, Logger: log}); err != nil {
			return fail(exitUsage, "-redis: %v", err)
		}
	}
	popts := []pool.Option{pool.WithExits(exits...)}
	var p *pool.Pool
	if d.st != nil {
		p, err = store.NewPool(d.st, popts...)
	} else {
		p, err = pool.New(popts...)
	}
	if err != nil {
		d.closeStore(log)
		return fail(exitData, "pool: %v", err)
	}
	if d.tel, err = proxyd.NewTelemetry(); err != nil {
		d.closeStore(log)
		return fail(exitFailed, "%v", err)
	}
	if d.s, err = proxyd.New(p, cfg, d.tel.TransportOption()); err != nil {
		d.closeStore(log)
		return fail(exitUsage, "%v", err)
	}
	if err := d.tel.Register(d.s); err != nil {
		d.closeStore(log)
		return fail(exitFailed, "%v", err)
	}
	d.reloader, err = pool.NewReloader(p, o.proxies, pool.ReloadSettings{
		Interval: o.reload,
		OnReload: func(ev pool.ReloadEvent) {
			if ev.Err != nil {
				log.Error("proxybreakerd: proxy list reload failed; keeping the exits", "err", ev.Err)
				return
			}
			r := ev.Result
			log.Info("proxybreakerd: proxy list reloaded", "added", r.Added, "removed", r.Removed, "replaced", r.Replaced, "updated", r.Updated)
		},
	})
	if err != nil {
		d.closeStore(log)
		return fail(exitUsage, "%v", err)
	}
	d.reloader.Check() // the file as read now: the next change is the first reload
	d.loaded.Store(true)
	return d, 0
}

// redisClient returns a client of the Redis (or, with cluster, the Redis Cluster) at u. The error
// never quotes the URL, which may hold a password.
func redisClient(u string, cluster bool) (goredis.UniversalClient, error) {
	if cluster {
		co, err := goredis.ParseClusterURL(u)
		if err != nil {
			return nil, errors.New("not a Redis Cluster URL (redis://host:port?addr=host2:port2)")
		}
		return goredis.NewClusterClient(co), nil
	}
	ro, err := goredis.ParseURL(u)
	if err != nil {
		return nil, errors.New("not a Redis URL (redis://host:6379/0)")
	}
	return goredis.NewClient(ro), nil
}

func (d *daemon) closeStore(log *slog.Logger) {
	if d.st != nil {
		if err := d.st.Close(); err != nil {
			log.Error("proxybreakerd: closing the state store", "err", err)
		}
	}
}

// serve listens, serves until ctx ends, and drains.
func (d *daemon) serve(ctx context.Context, o *options, log *slog.Logger, hup <-chan os.Signal, onStart started) int {
	type port struct {
		ln      net.Listener
		profile string
	}
	var ports []port
	closeAll := func() {
		for _, p := range ports {
			p.ln.Close()
		}
	}
	listen := func(addr, profile string) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		ports = append(ports, port{ln, profile})
		return nil
	}
	if err := listen(o.listen, ""); err != nil {
		log.Error("proxybreakerd: -listen", "err", err)
		d.shutdown(log, time.Second)
		return exitFailed
	}
	for _, p := range o.profiles {
		addr, opts, ok := strings.Cut(p, "=")
		if !ok {
			closeAll()
			log.Error("proxybreakerd: -profile " + p + ": want ADDR=OPTIONS")
			d.shutdown(log, time.Second)
			return exitUsage
		}
		if _, err := proxyd.ParseOptions(opts); err != nil {
			closeAll()
			log.Error("proxybreakerd: -profile "+addr, "err", err)
			d.shutdown(log, time.Second)
			return exitUsage
		}
		if err := listen(addr, opts); err != nil {
			closeAll()
			log.Error("proxybreakerd: -profile", "err", err)
			d.shutdown(log, time.Second)
			return exitFailed
		}
	}
	var adminSrv *http.Server
	adminAddr := ""
	if o.admin != "off" && o.admin != "" {
		h, err := d.s.Admin(proxyd.AdminConfig{Metrics: d.tel.Handler, Loaded: d.loaded.Load, Pprof: o.pprof})
		if err != nil {
			closeAll()
			log.Error("proxybreakerd: admin", "err", err)
			d.shutdown(log, time.Second)
			return exitFailed
		}
		aln, err := net.Listen("tcp", o.admin)
		if err != nil {
			closeAll()
			log.Error("proxybreakerd: -admin", "err", err)
			d.shutdown(log, time.Second)
			return exitFailed
		}
		adminAddr = aln.Addr().String()
		adminSrv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go adminSrv.Serve(aln)
	}
	var wg sync.WaitGroup
	serveErr := make(chan error, len(ports))
	for _, p := range ports {
		wg.Go(func() {
			if err := d.s.Serve(p.ln, p.profile); err != nil {
				serveErr <- err
			}
		})
		log.Info("proxybreakerd: serving", "addr", p.ln.Addr().String(), "profile", p.profile != "")
	}
	rctx, stopReload := context.WithCancel(context.Background())
	go d.reloader.Run(rctx)
	if onStart != nil {
		var addrs []string
		for _, p := range ports {
			addrs = append(addrs, p.ln.Addr().String())
		}
		onStart(addrs, adminAddr)
	}
	code := 0
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-hup:
			if _, err := d.reloader.Reload(); err == nil {
				log.Info("proxybreakerd: SIGHUP: proxy list reloaded")
			}
		case err := <-serveErr:
			log.Error("proxybreakerd: serving", "err", err)
			code = exitFailed
			break loop
		}
	}
	stopReload()
	log.Info("proxybreakerd: shutting down", "timeout", o.shutdownTO.String())
	if !d.shutdown(log, o.shutdownTO) && code == 0 {
		code = exitFailed
	}
	if adminSrv != nil {
		adminSrv.Close()
	}
	wg.Wait()
	return code
}

// shutdown drains the server within timeout and closes the store; it reports whether the drain
// finished in time.
func (d *daemon) shutdown(log *slog.Logger, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := d.s.Shutdown(ctx)
	if err != nil {
		log.Warn("proxybreakerd: tunnels still open at the shutdown timeout were closed", "err", err)
	}
	d.tel.Shutdown(context.Background())
	d.closeStore(log)
	return err == nil
}

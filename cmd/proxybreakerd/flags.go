package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/proxyd"
)

// Settings come from four places; the first that sets one wins:
//
//  1. a command-line flag (-listen 127.0.0.1:8118);
//  2. the environment: PROXYBREAKERD_ and the flag's name upper-cased, '-' as '_'
//     (PROXYBREAKERD_LISTEN, PROXYBREAKERD_ALLOW_PRIVATE=true);
//  3. the config file (-config FILE, or PROXYBREAKERD_CONFIG): one "name = value" a line, names
//     as the flags', # comments; a repeatable flag (profile) may appear on several lines;
//  4. the default.
//
// A repeatable flag takes its values from the first place that sets it at all, not a mix.

// envPrefix is the prefix of the environment variables.
const envPrefix = "PROXYBREAKERD_"

// options are the parsed settings.
type options struct {
	config       string
	listen       string
	admin        string
	proxies      string
	reload       time.Duration
	state        string
	redis        string
	redisNS      string
	redisCluster bool
	credentials  string
	allow        string
	allowPrivate bool
	profiles     stringList
	maxConns     int
	maxHeader    int
	headerTO     time.Duration
	idleTO       time.Duration
	handshakeTO  time.Duration
	firstByteTO  time.Duration
	tunnelIdleTO time.Duration
	shutdownTO   time.Duration
	pprof        bool
	logLevel     string
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("proxybreakerd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&o.config, "config", "", "optional config `FILE`: one \"name = value\" a line, names as these flags'")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8118", "`ADDR` of the proxy port: HTTP (absolute URI and CONNECT) and SOCKS5 on one port")
	fs.StringVar(&o.admin, "admin", "127.0.0.1:8119", "`ADDR` of the admin port (metrics, health, status page, report API); \"off\" for none")
	fs.StringVar(&o.proxies, "proxies", "", "proxy list `FILE` (pool.ReadExits syntax), reloaded on SIGHUP and when it changes (required)")
	fs.DurationVar(&o.reload, "reload-interval", pool.DefaultReloadInterval, "how often the proxy list is checked for changes")
	fs.StringVar(&o.state, "state", "", "SQLite state `FILE`: breakers survive a restart")
	fs.StringVar(&o.redis, "redis", "", "Redis `URL` (redis://host:6379/0): daemons sharing it share breakers, bans, limits and budgets")
	fs.BoolVar(&o.redisCluster, "redis-cluster", false, "-redis names a Redis Cluster: redis://host:port?addr=host2:port2&addr=… seeds")
	fs.StringVar(&o.redisNS, "redis-namespace", "proxybreaker", "key prefix of the fleet's state in Redis")
	fs.StringVar(&o.credentials, "credentials", "", "`FILE` of user:password lines the proxy demands of clients (required beyond loopback, unless -allow)")
	fs.StringVar(&o.allow, "allow", "", "comma-separated client `CIDRs` served (others are disconnected)")
	fs.BoolVar(&o.allowPrivate, "allow-private", false, "relay to loopback, link-local and private addresses (local test sites)")
	fs.Var(&o.profiles, "profile", "extra listener with fixed options, `ADDR=OPTIONS` (127.0.0.1:8120=country-us-session-a); repeatable")
	fs.IntVar(&o.maxConns, "max-conns", proxyd.DefaultMaxConns, "client connections open at once; more are closed on accept")
	fs.IntVar(&o.maxHeader, "max-header-bytes", proxyd.DefaultMaxHeaderBytes, "largest request head accepted")
	fs.DurationVar(&o.headerTO, "header-timeout", proxyd.DefaultHeaderTimeout, "time a client has for its request head or SOCKS5 handshake")
	fs.DurationVar(&o.idleTO, "idle-timeout", proxyd.DefaultIdleTimeout, "time a kept-alive client connection may wait for its next request")
	fs.DurationVar(&o.handshakeTO, "handshake-timeout", proxyd.DefaultHandshakeTimeout, "time a tunnel's setup through its exit may take")
	fs.DurationVar(&o.firstByteTO, "first-byte-timeout", proxyd.DefaultFirstByteTimeout, "time a tunnel waits for the origin's first byte after the client's")
	fs.DurationVar(&o.tunnelIdleTO, "tunnel-idle-timeout", proxyd.DefaultTunnelIdleTimeout, "time a tunnel may carry nothing either way before it is closed")
	fs.DurationVar(&o.shutdownTO, "shutdown-timeout", 30*time.Second, "time SIGTERM waits for requests and tunnels to finish")
	fs.BoolVar(&o.pprof, "pprof", false, "serve /debug/pprof/ on the admin port")
	fs.StringVar(&o.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	return fs
}

// usage writes the help text.
func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `proxybreakerd: proxybreaker's judgement as a local proxy for any client.

One port serves plain HTTP (absolute URI), CONNECT tunnels and SOCKS5 through the exits of a
proxy list, each pick steered by the pool's breakers per (exit, site). Clients steer it through
the proxy username: account-session-ID-country-us-tier-1-exit-LABEL (docs/daemon.md).

  proxybreakerd -proxies proxies.txt
  curl -x http://127.0.0.1:8118 https://example.com/
  curl --socks5-hostname 127.0.0.1:8118 https://example.com/
  curl -x http://acct-session-a-country-us:x@127.0.0.1:8118 https://example.com/

Settings: a flag wins over the environment (PROXYBREAKERD_NAME), which wins over the config file
(-config FILE, "name = value" lines), which wins over the default.

Flags:
`)
	fs.VisitAll(func(f *flag.Flag) {
		name, help := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  -%s %s\n    \t%s", f.Name, name, help)
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "\n    \tenv %s\n", envName(f.Name))
	})
	fmt.Fprint(w, `
Signals: SIGHUP reloads the proxy list; SIGINT and SIGTERM drain within -shutdown-timeout.
Admin port: /metrics /healthz /readyz /status /api/report /api/ban /api/release /api/stats
(/debug/pprof/ with -pprof).
`)
}

func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseFlags parses args, then fills what they left unset from the environment (lookup) and the
// config file, in that order.
func parseFlags(args []string, lookup func(string) (string, bool)) (*options, *flag.FlagSet, error) {
	o := &options{}
	fs := newFlagSet(o)
	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	if fs.NArg() > 0 {
		return nil, fs, fmt.Errorf("unexpected argument %q (see -h)", pool.RedactRaw(fs.Arg(0)))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var unsetErr error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || unsetErr != nil {
			return
		}
		if v, ok := lookup(envName(f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				unsetErr = fmt.Errorf("%s=%q: %v", envName(f.Name), pool.RedactRaw(v), err)
			}
			set[f.Name] = true
		}
	})
	if unsetErr != nil {
		return nil, fs, unsetErr
	}
	if o.config != "" {
		if err := applyConfigFile(fs, o.config, set); err != nil {
			return nil, fs, err
		}
	}
	return o, fs, nil
}

// applyConfigFile sets from path every flag not in set.
func applyConfigFile(fs *flag.FlagSet, path string, set map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" {
			return fmt.Errorf("config %s: line %d: want name = value", path, n)
		}
		if fs.Lookup(name) == nil || name == "config" {
			return fmt.Errorf("config %s: line %d: unknown setting %q (the flags' names, see -h)", path, n, name)
		}
		if set[name] {
			continue
		}
		if err := fs.Set(name, value); err != nil {
			return fmt.Errorf("config %s: line %d: %s: %v", path, n, name, err)
		}
	}
	return sc.Err()
}

// readCredentials reads user:password lines (# comments, blank lines skipped).
func readCredentials(path string) ([]proxyd.Credential, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []proxyd.Credential
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		u, p, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("credentials %s: line %d: want user:password", path, n+1)
		}
		out = append(out, proxyd.Credential{User: u, Pass: p})
	}
	if len(out) == 0 {
		return nil, errors.New("credentials " + path + ": no user:password line")
	}
	return out, nil
}

// parseAllow reads a comma-separated list of CIDRs (or single addresses).
func parseAllow(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("allow: %q is neither a CIDR nor an address", f)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

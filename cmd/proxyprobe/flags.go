package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/probe"
)

// options are the parsed flags.
type options struct {
	proxies     string
	targets     stringList
	targetsFile string
	format      string
	state       string
	park        time.Duration
	ca          string
	userAgent   string
	quiet       bool

	deadline, connect, tlsTimeout, header, body time.Duration
	bodyLimit                                   int64
	concurrency                                 int

	criticalSuccess, criticalThrottled, degradedSuccess, degradedBlocked float64
	slowP95                                                              time.Duration
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("proxyprobe", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are ours to print, on one line
	fs.Usage = func() {}
	fs.StringVar(&o.proxies, "proxies", "", "proxy list `FILE` (\"-\" for stdin), one proxy a line in the forms pool.ReadExits reads")
	fs.Var(&o.targets, "target", "target `URL` to probe through every proxy (repeatable)")
	fs.StringVar(&o.targetsFile, "targets", "", "`FILE` of target URLs, one a line")
	fs.StringVar(&o.format, "format", "json", "output `format`: json (the schema in docs/probe.md) or table")
	fs.StringVar(&o.state, "state", "", "also write a pool.SavedState to `FILE` for pool.Pool.Restore")
	fs.DurationVar(&o.park, "park", probe.DefaultParkFor, "how long the state parks proxies that failed permanently")
	fs.StringVar(&o.ca, "ca", "", "PEM `FILE` of extra root certificates to trust for https targets")
	fs.StringVar(&o.userAgent, "user-agent", probe.DefaultUserAgent, "User-Agent of the probes")
	fs.BoolVar(&o.quiet, "quiet", false, "nothing on stderr but errors: no progress line on a terminal, no summary line elsewhere")
	fs.DurationVar(&o.deadline, "deadline", probe.DefaultDeadline, "hard deadline of the whole run")
	fs.DurationVar(&o.connect, "connect-timeout", probe.DefaultConnectTimeout, "TCP connect timeout to each proxy (negative: none)")
	fs.DurationVar(&o.tlsTimeout, "tls-timeout", probe.DefaultTLSTimeout, "TLS handshake timeout (negative: none)")
	fs.DurationVar(&o.header, "header-timeout", probe.DefaultHeaderTimeout, "timeout from a probe's start to its response headers (negative: none)")
	fs.DurationVar(&o.body, "body-timeout", probe.DefaultBodyTimeout, "timeout reading a body once the headers are in (negative: none)")
	fs.Int64Var(&o.bodyLimit, "body-limit", probe.DefaultBodyLimit, "body bytes read per probe")
	fs.IntVar(&o.concurrency, "concurrency", probe.DefaultConcurrency, "probes in flight at once")
	fs.Float64Var(&o.criticalSuccess, "critical-success", probe.DefaultCriticalSuccess, "success rate below which the verdict is CRITICAL (negative: off)")
	fs.Float64Var(&o.criticalThrottled, "critical-throttled", 0, "share of 429s above which the verdict is CRITICAL; 0: any 429 (negative: off)")
	fs.Float64Var(&o.degradedSuccess, "degraded-success", probe.DefaultDegradedSuccess, "success rate below which the verdict is DEGRADED (negative: off)")
	fs.Float64Var(&o.degradedBlocked, "degraded-blocked", 0, "share of challenge pages above which the verdict is DEGRADED; 0: any (negative: off)")
	fs.DurationVar(&o.slowP95, "slow-p95", probe.DefaultSlowP95, "p95 latency above which the verdict is DEGRADED (negative: off)")
	return fs
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := newFlagSet(o)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil, err
		}
		return nil, fail(exitUsage, "%v (see -h)", err)
	}
	if fs.NArg() > 0 {
		return nil, fail(exitUsage, "unexpected argument %q: targets go in -target URL (see -h)", pool.RedactRaw(fs.Arg(0)))
	}
	return o, nil
}

// check rejects flag values no run could use.
func (o *options) check() error {
	switch {
	case o.proxies == "":
		return fail(exitUsage, "no proxy list: give -proxies FILE, or -proxies - for stdin (see -h)")
	case o.format != "json" && o.format != "table":
		return fail(exitUsage, "-format %q: want json or table", o.format)
	case o.deadline <= 0:
		return fail(exitUsage, "-deadline %v: must be positive", o.deadline)
	case o.concurrency <= 0:
		return fail(exitUsage, "-concurrency %d: must be positive", o.concurrency)
	case o.bodyLimit <= 0:
		return fail(exitUsage, "-body-limit %d: must be positive", o.bodyLimit)
	case o.park <= 0:
		return fail(exitUsage, "-park %v: must be positive", o.park)
	}
	// The Policy's own checks; a zero threshold given on the command line means "zero", which for
	// the success rates and the slow tail the Policy reads as "default": say so instead.
	switch {
	case o.criticalSuccess == 0:
		return fail(exitUsage, "-critical-success 0: use a negative value to turn the rule off")
	case o.degradedSuccess == 0:
		return fail(exitUsage, "-degraded-success 0: use a negative value to turn the rule off")
	case o.slowP95 == 0:
		return fail(exitUsage, "-slow-p95 0: use a negative value to turn the rule off")
	}
	if err := o.policy().Validate(); err != nil {
		return fail(exitUsage, "%v", err)
	}
	return nil
}

func (o *options) policy() probe.Policy {
	return probe.Policy{
		CriticalSuccess: o.criticalSuccess, CriticalThrottled: o.criticalThrottled,
		DegradedSuccess: o.degradedSuccess, DegradedBlocked: o.degradedBlocked, SlowP95: o.slowP95,
	}
}

func (o *options) config(exits []*pool.Exit, targets []string, tmpl *http.Transport) probe.Config {
	return probe.Config{
		Exits: exits, Targets: targets, Template: tmpl,
		Deadline: o.deadline, Concurrency: o.concurrency,
		ConnectTimeout: o.connect, TLSTimeout: o.tlsTimeout, HeaderTimeout: o.header, BodyTimeout: o.body,
		BodyLimit: o.bodyLimit, UserAgent: o.userAgent, Policy: o.policy(),
	}
}

// usage writes the command's help.
func usage(w io.Writer) {
	fmt.Fprint(w, `usage: proxyprobe -proxies FILE|- (-target URL ... | -targets FILE) [flags]

Probes every target through every proxy within a hard deadline and writes a JSON report on stdout
(schema: docs/probe.md); on stderr, a progress line when it is a terminal, else one summary line
at the end (-quiet: neither). Exit codes: 0 HEALTHY, 1 DEGRADED, 2 CRITICAL, 64 bad usage, 65 bad
proxy or target list, 66 unreadable input, 73 state file not written, 74 stdout not written.

flags:
`)
	fs := newFlagSet(&options{})
	fs.SetOutput(w)
	fs.PrintDefaults()
}

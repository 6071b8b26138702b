package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// Defaults for Config fields left at their zero value.
const (
	DefaultDeadline       = 10 * time.Second
	DefaultConcurrency    = 256
	DefaultConnectTimeout = 3 * time.Second
	DefaultTLSTimeout     = 3 * time.Second
	DefaultHeaderTimeout  = 5 * time.Second
	DefaultBodyTimeout    = 3 * time.Second
	DefaultBodyLimit      = 64 << 10
	DefaultUserAgent      = "proxyprobe/1"
)

// MaxProbes bounds exits × targets, so a wrong flag cannot plan a billion requests.
const MaxProbes = 1_000_000

// MaxConcurrency bounds Config.Concurrency: the goroutines, connections and file descriptors a
// run holds at once, however many exits it probes.
const MaxConcurrency = 4096

// Config describes one probe run. Exits and Targets are required; every other field's zero value
// means its default. Negative per-request timeouts disable that timeout (the deadline still bounds
// every probe).
type Config struct {
	// Exits are the proxies to probe. Their labels name them in the report and must be unique.
	Exits []*pool.Exit
	// Targets are the absolute http or https URLs each exit fetches once. Credentials in a target
	// URL are redacted in the report.
	Targets []string

	// Deadline is the hard bound on the whole run: probes still in flight when it passes are cut
	// and reported as "deadline". Default 10 s; it must not be negative.
	Deadline time.Duration
	// Concurrency is how many probes run at once: Run starts this many workers (or one per probe,
	// if fewer), whatever the number of exits. Default 256, at most MaxConcurrency. Each probe
	// holds one or two file descriptors (Go raises the soft descriptor limit to the hard one at
	// start), and closes them when it ends. A probe of a hanging exit holds its worker until a
	// timeout, so with H hanging probes and header timeout T the run needs about
	// H×T/Concurrency; past the deadline the rest is reported as cut.
	Concurrency int

	// ConnectTimeout bounds the TCP connection to the proxy. Default 3 s.
	ConnectTimeout time.Duration
	// TLSTimeout bounds each TLS handshake (with the origin through a CONNECT tunnel, or with an
	// https:// proxy). Default 3 s.
	TLSTimeout time.Duration
	// HeaderTimeout bounds a probe from its start until the response headers arrived and the
	// classifier has peeked at a suspicious body: a proxy that accepts TCP and never answers, or a
	// CONNECT or SOCKS handshake that never completes, ends here. Default 5 s.
	HeaderTimeout time.Duration
	// BodyTimeout bounds reading the body once the headers are in: a slow-loris body ends here.
	// Default 3 s.
	BodyTimeout time.Duration
	// BodyLimit is how many body bytes a probe reads before it closes the body (which, as for live
	// traffic, counts as success). Default 64 KiB.
	BodyLimit int64

	// Classifier judges each probe. Default transport.DefaultClassifier; give the Transport's own
	// classifier so that probe and transport agree.
	Classifier transport.Classifier
	// Template is the *http.Transport each exit's transport is cloned from, as for
	// transport.WithBaseTemplate (TLS roots, connection limits). Default
	// transport.DefaultBaseTemplate(). Its dial and TLS handshake timeouts are replaced by
	// ConnectTimeout and TLSTimeout.
	Template *http.Transport
	// Resolver looks origin names up for socks5:// exits. Default net.DefaultResolver.
	Resolver *net.Resolver
	// OriginKey maps a target URL to its origin key, as the Pool does (transport.WithOriginKey).
	// Default transport.OriginHost.
	OriginKey transport.OriginFunc
	// Policy derives the verdict and the recommendations. The zero value is the defaults.
	Policy Policy
	// UserAgent is sent with every probe. Default DefaultUserAgent.
	UserAgent string

	// Progress, when set, is called after each probe is recorded with how many are done out of how
	// many. It is called from Run's goroutine, one call at a time, and must be quick.
	Progress func(done, total int)
}

// Prober runs probes as its Config describes. It is safe for concurrent use; each Run is
// independent. Each probe builds its exit's base transport (transport.NewExitTransport) when it
// starts and closes its connections when it ends, so a Prober holds no per-exit transport and a
// run holds at most Concurrency connections.
type Prober struct {
	cfg     Config
	exits   []*pool.Exit
	tmpl    *http.Transport // the template each probe's transport is cloned from
	targets []target
	policy  Policy
}

// target is one target URL, parsed.
type target struct {
	raw    string // as given: requests are made from it
	shown  string // redacted, for the report
	origin string
}

var errNoExits = errors.New("probe: no exits")

// New validates cfg and returns a Prober. Errors name the offending exit by its label and the
// offending target with its credentials redacted.
func New(cfg Config) (*Prober, error) {
	if len(cfg.Exits) == 0 {
		return nil, errNoExits
	}
	if len(cfg.Targets) == 0 {
		return nil, errors.New("probe: no targets")
	}
	if n := len(cfg.Exits) * len(cfg.Targets); n > MaxProbes || n/len(cfg.Targets) != len(cfg.Exits) {
		return nil, fmt.Errorf("probe: %d exits × %d targets is more than %d probes", len(cfg.Exits), len(cfg.Targets), MaxProbes)
	}
	switch {
	case cfg.Deadline < 0:
		return nil, fmt.Errorf("probe: Deadline %v: must not be negative", cfg.Deadline)
	case cfg.Deadline == 0:
		cfg.Deadline = DefaultDeadline
	}
	switch {
	case cfg.Concurrency < 0:
		return nil, fmt.Errorf("probe: Concurrency %d: must not be negative", cfg.Concurrency)
	case cfg.Concurrency == 0:
		cfg.Concurrency = DefaultConcurrency
	case cfg.Concurrency > MaxConcurrency:
		return nil, fmt.Errorf("probe: Concurrency %d: at most %d", cfg.Concurrency, MaxConcurrency)
	}
	cfg.ConnectTimeout = orDefault(cfg.ConnectTimeout, DefaultConnectTimeout)
	cfg.TLSTimeout = orDefault(cfg.TLSTimeout, DefaultTLSTimeout)
	cfg.HeaderTimeout = orDefault(cfg.HeaderTimeout, DefaultHeaderTimeout)
	cfg.BodyTimeout = orDefault(cfg.BodyTimeout, DefaultBodyTimeout)
	switch {
	case cfg.BodyLimit < 0:
		return nil, fmt.Errorf("probe: BodyLimit %d: must not be negative", cfg.BodyLimit)
	case cfg.BodyLimit == 0:
		cfg.BodyLimit = DefaultBodyLimit
	}
	if cfg.Classifier == nil {
		cfg.Classifier = transport.DefaultClassifier
	}
	if cfg.OriginKey == nil {
		cfg.OriginKey = transport.OriginHost
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	if strings.ContainsAny(cfg.UserAgent, "\r\n") {
		return nil, errors.New("probe: UserAgent contains a line break")
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	p := &Prober{cfg: cfg, exits: cfg.Exits, policy: cfg.Policy.withDefaults()}

	seen := make(map[string]bool, len(cfg.Exits))
	for i, e := range cfg.Exits {
		if e == nil {
			return nil, fmt.Errorf("probe: exit %d is nil", i)
		}
		if seen[e.Label()] {
			return nil, fmt.Errorf("probe: two exits labelled %q: labels name exits in the report and must be unique", e.Label())
		}
		seen[e.Label()] = true
	}
	for _, raw := range cfg.Targets {
		t, err := parseTarget(raw, cfg.OriginKey)
		if err != nil {
			return nil, err
		}
		p.targets = append(p.targets, t)
	}

	tmpl := cfg.Template
	if tmpl == nil {
		tmpl = transport.DefaultBaseTemplate()
	}
	p.tmpl = probeTemplate(tmpl, cfg.ConnectTimeout, cfg.TLSTimeout)
	return p, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// parseTarget checks that raw is an absolute http(s) URL with a host.
func parseTarget(raw string, originKey transport.OriginFunc) (target, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		// url.Parse quotes its input, credentials and all: say it in our words.
		return target{}, fmt.Errorf("probe: target %q: malformed URL", pool.RedactRaw(raw))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return target{}, fmt.Errorf("probe: target %q: want an http or https URL", u.Redacted())
	}
	if u.Hostname() == "" {
		return target{}, fmt.Errorf("probe: target %q: missing host", u.Redacted())
	}
	return target{raw: u.String(), shown: u.Redacted(), origin: originKey(u)}, nil
}

// probeTemplate returns a copy of tmpl whose dials and TLS handshakes are bounded by the probe's
// timeouts. The template's own dialer is kept (wrapped), so a custom DialContext still dials.
func probeTemplate(tmpl *http.Transport, connect, tlsTimeout time.Duration) *http.Transport {
	t := tmpl.Clone()
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	if connect > 0 {
		t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, connect)
			defer cancel()
			return dial(ctx, network, addr)
		}
	} else {
		t.DialContext = dial
	}
	if tlsTimeout > 0 {
		t.TLSHandshakeTimeout = tlsTimeout
	} else {
		t.TLSHandshakeTimeout = 0
	}
	// Idle connections are closed when a run ends; a probe never waits for a 100-continue.
	t.ExpectContinueTimeout = 0
	return t
}

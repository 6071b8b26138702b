package transport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// Defaults for the options.
const (
	DefaultHeaderTimeout = 15 * time.Second
	DefaultIdleTTL       = 10 * time.Minute
	DefaultMaxSessions   = 10000
)

// DefaultExitSettings govern each exit's own breaker: parked by exit-scoped permanent failures
// (407, gateway refused, proxy DNS), and tripped by connection-level trouble (timeouts, resets)
// across all origins: 5 such failures in a minute trip it while the exit has carried fewer than 10
// attempts in that minute; from 10 attempts on, they must also make up half of them.
// It returns a fresh value each time: change your copy and pass it to WithExitBreakerSettings.
func DefaultExitSettings() breaker.Settings {
	return breaker.Settings{FailureThreshold: 5, FailureRatio: 0.5, MinVolume: 10}
}

// Selection is how the pool chooses among ready exits.
type Selection uint8

// The selection strategies.
const (
	// LeastLoaded draws two ready exits at random and takes the one with fewer requests in flight
	// (power of two choices): a slow or hanging exit accumulates requests in flight and is drawn
	// less. The default.
	LeastLoaded Selection = iota
	// Random takes a ready exit uniformly at random (by weight).
	Random
)

// Option configures a Pool or a Transport. Options are built by the With functions.
type Option interface{ apply(*config) error }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// poolOption marks an option that configures the pool, which WithPool cannot be combined with.
func poolOption(name string, f func(*config) error) Option {
	return optionFunc(func(c *config) error {
		c.poolOptions = append(c.poolOptions, name)
		return f(c)
	})
}

type config struct {
	exits         []*Exit
	clock         clock.Clock
	pair, exit    breaker.Settings
	guard         OriginGuardSettings
	classifier    Classifier
	observers     observers
	base          http.RoundTripper
	template      *http.Transport
	originKey     OriginFunc
	headerTimeout time.Duration
	dryRun        bool
	selection     Selection
	ignoreTiers   bool
	idleTTL       time.Duration
	rand          func() uint64
	maxSessions   int
	pool          *Pool
	gate          *ratelimit.Gate
	resolver      *net.Resolver
	claimer       ProbeClaimer
	poolOptions   []string // names of pool options given, to reject them beside WithPool
}

func newConfig(opts []Option) (*config, error) {
	c := &config{
		clock:         clock.System,
		exit:          DefaultExitSettings(),
		classifier:    DefaultClassifier,
		originKey:     OriginHost,
		headerTimeout: DefaultHeaderTimeout,
		idleTTL:       DefaultIdleTTL,
		rand:          rand.Uint64,
		resolver:      net.DefaultResolver,
		maxSessions:   DefaultMaxSessions,
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// WithExits adds exits to the pool.
func WithExits(exits ...*Exit) Option {
	return poolOption("WithExits", func(c *config) error {
		for i, e := range exits {
			if e == nil {
				return fmt.Errorf("transport: WithExits: exit %d is nil", i)
			}
		}
		c.exits = append(c.exits, exits...)
		return nil
	})
}

// WithClock sets the clock breakers read. Default clock.System. Network timeouts always run on
// real time.
func WithClock(cl clock.Clock) Option {
	return poolOption("WithClock", func(c *config) error {
		if cl == nil {
			return fmt.Errorf("transport: WithClock: nil clock")
		}
		c.clock = cl
		return nil
	})
}

// WithBreakerSettings sets the settings of the per-(exit, origin) breakers. Default breaker.Settings{}.
func WithBreakerSettings(s breaker.Settings) Option {
	return poolOption("WithBreakerSettings", func(c *config) error { c.pair = s; return nil })
}

// WithExitBreakerSettings sets the settings of each exit's own breaker. Default DefaultExitSettings().
func WithExitBreakerSettings(s breaker.Settings) Option {
	return poolOption("WithExitBreakerSettings", func(c *config) error { c.exit = s; return nil })
}

// WithOriginGuard sets the origin guard's settings. Default OriginGuardSettings{}.
func WithOriginGuard(s OriginGuardSettings) Option {
	return poolOption("WithOriginGuard", func(c *config) error { c.guard = s; return nil })
}

// WithClassifier sets the classifier. Default DefaultClassifier.
func WithClassifier(cl Classifier) Option {
	return optionFunc(func(c *config) error {
		if cl == nil {
			return fmt.Errorf("transport: WithClassifier: nil classifier")
		}
		c.classifier = cl
		return nil
	})
}

// WithObserver adds observers. Each receives every event, in the order added.
func WithObserver(obs ...Observer) Option {
	return poolOption("WithObserver", func(c *config) error {
		for _, o := range obs {
			if o == nil {
				return fmt.Errorf("transport: WithObserver: nil observer")
			}
			c.observers = append(c.observers, o)
		}
		return nil
	})
}

// WithBase replaces the per-exit base transports with rt, which must send each request through
// ExitFromContext(req.Context()) and never directly.
func WithBase(rt http.RoundTripper) Option {
	return optionFunc(func(c *config) error {
		if rt == nil {
			return fmt.Errorf("transport: WithBase: nil RoundTripper")
		}
		c.base = rt
		return nil
	})
}

// WithBaseTemplate sets the *http.Transport each exit's base transport is cloned from: TLS
// settings, timeouts, connection limits. Its Proxy, OnProxyConnectResponse and (for SOCKS exits)
// DialContext are replaced. Default: DefaultBaseTemplate().
func WithBaseTemplate(t *http.Transport) Option {
	return optionFunc(func(c *config) error {
		if t == nil {
			return fmt.Errorf("transport: WithBaseTemplate: nil template")
		}
		c.template = t
		return nil
	})
}

// WithResolver sets the resolver socks5:// exits look origin names up with (socks5h:// exits leave
// that to the proxy; HTTP proxies resolve names themselves). Default net.DefaultResolver.
func WithResolver(r *net.Resolver) Option {
	return optionFunc(func(c *config) error {
		if r == nil {
			return fmt.Errorf("transport: WithResolver: nil resolver")
		}
		c.resolver = r
		return nil
	})
}

// WithOriginKey sets how a request URL maps to an origin. Default OriginHost; OriginSite groups
// by registrable domain.
func WithOriginKey(f OriginFunc) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return fmt.Errorf("transport: WithOriginKey: nil func")
		}
		c.originKey = f
		return nil
	})
}

// WithHeaderTimeout bounds each attempt from the moment it leaves until its response headers (and
// the peek at a suspicious body) arrive. It is what lets the transport blame a hanging exit: a
// timeout of the caller's own context is neutral. Keep it below http.Client.Timeout. Default 15 s;
// negative disables it.
func WithHeaderTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d == 0 {
			d = DefaultHeaderTimeout
		}
		c.headerTimeout = d
		return nil
	})
}

// WithDryRun makes breakers observe without steering: every attempt goes to a random exit, verdicts
// still move the breakers, and observers see what would have been refused (AttemptInfo.WouldRefuse).
func WithDryRun() Option {
	return poolOption("WithDryRun", func(c *config) error { c.dryRun = true; return nil })
}

// WithSelection sets how the pool chooses among ready exits. Default LeastLoaded.
func WithSelection(s Selection) Option {
	return poolOption("WithSelection", func(c *config) error {
		if s > Random {
			return fmt.Errorf("transport: WithSelection: unknown selection %d", s)
		}
		c.selection = s
		return nil
	})
}

// WithoutTiers makes selection ignore exit tiers. By default the lowest tier with a ready exit for
// the origin serves it, and higher tiers are used only while it has none.
func WithoutTiers() Option {
	return poolOption("WithoutTiers", func(c *config) error { c.ignoreTiers = true; return nil })
}

// WithIdleTTL sets how long an idle, healthy (exit, origin) breaker is kept. Default 10 min.
func WithIdleTTL(d time.Duration) Option {
	return poolOption("WithIdleTTL", func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("transport: WithIdleTTL(%v): must be positive", d)
		}
		c.idleTTL = d
		return nil
	})
}

// WithRand sets the random source for selection; it must be safe for concurrent use. Default
// math/rand/v2.Uint64. The origin guards' jitter draws from it too; pair and exit breakers' jitter
// has its own source, in breaker.Settings.Rand.
func WithRand(f func() uint64) Option {
	return poolOption("WithRand", func(c *config) error {
		if f == nil {
			return fmt.Errorf("transport: WithRand: nil func")
		}
		c.rand = f
		return nil
	})
}

// WithPool makes a Transport use an existing Pool (shared with other transports) instead of making
// one; pool options given beside it are an error.
func WithPool(p *Pool) Option {
	return optionFunc(func(c *config) error {
		if p == nil {
			return fmt.Errorf("transport: WithPool: nil pool")
		}
		c.pool = p
		return nil
	})
}

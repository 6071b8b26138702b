package pool

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// Defaults for the options.
const (
	DefaultIdleTTL     = 10 * time.Minute
	DefaultMaxSessions = 10000
)

// DefaultExitSettings govern each exit's own breaker: parked by exit-scoped permanent failures
// (407, gateway refused, proxy DNS), and tripped by connection-level trouble (timeouts, resets)
// across all origins: 5 such failures in a minute, however busy the exit. A transient trip rests
// the exit at most ExitRest, whatever its level (a park keeps its ParkFor).
// It returns a fresh value each time: change your copy and pass it to WithExitSettings.
//
// Until 2026-12-02 the default also asked, once the exit had carried 10 attempts in the minute,
// that the failures make up half of them (FailureRatio 0.5, MinVolume 10), and let a trip climb
// the ladder to a quarter of an hour: a busy exit that times out three attempts in ten never
// tripped while busy, and once idle rested long enough that its pairs missed the end of their
// bans (docs/decisions.md).
func DefaultExitSettings() breaker.Settings {
	return breaker.Settings{FailureThreshold: 5}
}

// Selection is how the pool chooses among ready exits.
type Selection uint8

// The selection strategies.
const (
	// LeastLoaded draws two distinct ready exits at random and takes the one with the lower
	// expected latency × (attempts in flight for the origin + 1) — power of two choices with
	// Finagle's peak-EWMA cost, per (exit, origin): an exit that answers a site several times
	// slower than its others is left out for that site but for a trickle, and a hanging one
	// accumulates leases and is drawn less (see latency.go). The default.
	LeastLoaded Selection = iota
	// Random takes a ready exit uniformly at random (by weight).
	Random
)

var selectionNames = [...]string{"least_loaded", "random"}

// String returns "least_loaded" or "random".
func (s Selection) String() string {
	if int(s) < len(selectionNames) {
		return selectionNames[s]
	}
	return fmt.Sprintf("selection(%d)", uint8(s))
}

// Option configures a Pool. Options are built by the With functions. One rule holds for every
// option and every settings struct: a zero value keeps the default; a value that cannot be right
// (a negative TTL, a nil clock) is an error from New naming the option.
type Option interface{ apply(*config) error }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	exits       []*Exit
	clock       clock.Clock
	pair, exit  breaker.Settings
	guard       OriginGuardSettings
	observers   []Observer
	dryRun      bool
	selection   Selection
	ignoreTiers bool
	idleTTL     time.Duration
	inlineSweep bool
	rand        func() uint64
	seeded      bool
	// strictSessions: WithStrictSessions (gateway_sticky.go).
	strictSessions bool
	maxSessions    int
	// sessionMaxAge, sessionMaxUses: WithSessionLimits (session_limits.go); 0: no limit.
	sessionMaxAge  time.Duration
	sessionMaxUses uint32
	gate           *ratelimit.Gate
	limits         bool // WithRateLimits was given
	claimer        ProbeClaimer
	rules          []*originRule // WithOriginSettings, in the order given
	groups         GroupSettings
	concurrency    *ConcurrencySettings // WithAdaptiveConcurrency; nil: no limits (limit.go)
	spend          spendBook            // WithTierCost, WithTierBudget, WithBudgetSource (cost.go, budget.go)
}

func newConfig(opts []Option) (*config, error) {
	c := &config{
		clock:       clock.System,
		exit:        DefaultExitSettings(),
		idleTTL:     DefaultIdleTTL,
		rand:        rand.Uint64,
		maxSessions: DefaultMaxSessions,
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(c); err != nil {
			return nil, err
		}
	}
	if c.gate == nil {
		// No limits configured: pairs that meet a 429 still learn the origin's window.
		g, err := ratelimit.New(ratelimit.Limits{})
		if err != nil {
			return nil, fmt.Errorf("pool: default pacing: %w", err)
		}
		c.gate = g
	}
	if c.seeded {
		// One seeded source for everything random in the pool: selection, the origin guards'
		// jitter, and the breakers' jitter unless their settings bring a source of their own.
		jitter := func() float64 { return float64(c.rand()>>11) / (1 << 53) }
		if c.pair.Rand == nil {
			c.pair.Rand = jitter
		}
		if c.exit.Rand == nil {
			c.exit.Rand = jitter
		}
	}
	return c, nil
}

// WithExits adds exits to the pool.
func WithExits(exits ...*Exit) Option {
	return optionFunc(func(c *config) error {
		for i, e := range exits {
			if e == nil {
				return fmt.Errorf("pool: WithExits: exit %d is nil", i)
			}
		}
		c.exits = append(c.exits, exits...)
		return nil
	})
}

// WithClock sets the clock the pool reads and waits on. Default clock.System.
func WithClock(cl clock.Clock) Option {
	return optionFunc(func(c *config) error {
		if cl == nil {
			return fmt.Errorf("pool: WithClock: nil clock")
		}
		c.clock = cl
		return nil
	})
}

// WithPairSettings sets the settings of the per-(exit, origin) breakers. Default breaker.Settings{}
// (every field at its default). Origins (WithOriginSettings) and exits (Exit.WithPairSettings) may
// override them field by field.
func WithPairSettings(s breaker.Settings) Option {
	return optionFunc(func(c *config) error { c.pair = s; return nil })
}

// WithExitSettings sets the settings of each exit's own breaker. Default DefaultExitSettings().
// An exit may override them field by field (Exit.WithExitSettings).
func WithExitSettings(s breaker.Settings) Option {
	return optionFunc(func(c *config) error { c.exit = s; return nil })
}

// WithOriginGuard sets the origin guard's settings. Default OriginGuardSettings{}.
func WithOriginGuard(s OriginGuardSettings) Option {
	return optionFunc(func(c *config) error { c.guard = s; return nil })
}

// WithObserver adds observers. Each receives every event, in the order added.
func WithObserver(obs ...Observer) Option {
	return optionFunc(func(c *config) error {
		for _, o := range obs {
			if o == nil {
				return fmt.Errorf("pool: WithObserver: nil observer")
			}
			c.observers = append(c.observers, o)
		}
		return nil
	})
}

// WithDryRun makes breakers observe without steering: every pick gets a random exit, verdicts
// still move the breakers, and each lease says whether the breakers would have refused it
// (LeaseInfo.WouldRefuse).
func WithDryRun() Option {
	return optionFunc(func(c *config) error { c.dryRun = true; return nil })
}

// WithSelection sets how the pool chooses among ready exits. Default LeastLoaded.
func WithSelection(s Selection) Option {
	return optionFunc(func(c *config) error {
		if s > Random {
			return fmt.Errorf("pool: WithSelection: unknown selection %d", s)
		}
		c.selection = s
		return nil
	})
}

// WithoutTiers makes selection ignore exit tiers. By default the lowest tier with a ready exit for
// the origin serves it, and higher tiers are used only while it has none.
func WithoutTiers() Option {
	return optionFunc(func(c *config) error { c.ignoreTiers = true; return nil })
}

// WithIdleTTL sets how long an idle, healthy (exit, origin) breaker is kept. Default 10 min.
func WithIdleTTL(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return fmt.Errorf("pool: WithIdleTTL(%v): must not be negative", d)
		}
		if d == 0 {
			d = DefaultIdleTTL
		}
		c.idleTTL = d
		return nil
	})
}

// WithInlineSweep makes the pool sweep idle breakers on the pick that finds a sweep due, before it
// picks, instead of in a background goroutine: slower for that one pick, but nothing runs outside
// the caller's goroutines. A simulation on a fake clock uses it to stay deterministic.
func WithInlineSweep() Option {
	return optionFunc(func(c *config) error { c.inlineSweep = true; return nil })
}

// WithSeed makes everything random in the pool — selection, the origin guards' jitter, and the
// pair and exit breakers' jitter unless their Settings.Rand is set — draw from one source seeded
// with seed, so that a pool driven by one goroutine on a clock.Fake makes the same choices on
// every run. By default the pool draws from math/rand/v2's global source.
func WithSeed(seed uint64) Option {
	return optionFunc(func(c *config) error {
		r := &lockedRand{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
		c.rand, c.seeded = r.Uint64, true
		return nil
	})
}

// lockedRand makes a seeded generator safe for concurrent use.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (l *lockedRand) Uint64() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Uint64()
}

// WithMaxSessions bounds how many (session, origin) pins the pool keeps for sticky sessions
// (Request.Session); when full, an arbitrary pin is forgotten and its session picks anew.
// Default 10,000.
func WithMaxSessions(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 0 {
			return fmt.Errorf("pool: WithMaxSessions(%d): must not be negative", n)
		}
		if n == 0 {
			n = DefaultMaxSessions
		}
		c.maxSessions = n
		return nil
	})
}

// WithRateLimits puts token buckets in front of the breakers: per exit, per (exit, origin) and per
// origin, as l says (see package ratelimit). An exit whose bucket has no token is not ready, so the
// picker takes another that has one instead of waiting; when none has, the pick waits for the
// soonest token, bounded by its context, or fails fast with a *ThrottledError if l.FailFast.
// Whatever the configured limits, a pair that meets a 429 learns its pace from it (see package
// ratelimit, "Learned pace"); without this option the pool paces with ratelimit.Limits{}, which
// limits nothing until a pair has shown a limit. l.Adaptive.Disabled turns the learning off.
func WithRateLimits(l ratelimit.Limits) Option {
	return optionFunc(func(c *config) error {
		g, err := ratelimit.New(l)
		if err != nil {
			return fmt.Errorf("pool: WithRateLimits: %w", err)
		}
		c.gate, c.limits = g, true
		return nil
	})
}

// WithProbeClaimer makes the pool claim each probe with c before sending it.
func WithProbeClaimer(c ProbeClaimer) Option {
	return optionFunc(func(cfg *config) error {
		if c == nil {
			return fmt.Errorf("pool: WithProbeClaimer: nil claimer")
		}
		cfg.claimer = c
		return nil
	})
}

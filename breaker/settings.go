package breaker

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Defaults for Settings fields left at their zero value.
const (
	DefaultFailureThreshold = 3
	DefaultWindow           = 60 * time.Second
	DefaultMinVolume        = 20
	DefaultBaseCooldown     = 20 * time.Second
	DefaultMaxCooldown      = 15 * time.Minute
	DefaultJitter           = 0.25
	DefaultMaxRetryAfter    = time.Hour
	DefaultStablePeriod     = 5 * time.Minute
	DefaultHalfOpenProbes   = 1
	DefaultSuccessesToClose = 1
	DefaultProbeLease       = 30 * time.Second
)

// Limits that keep a breaker small and its arithmetic safe.
const (
	MaxFailureThreshold = 1024
	MaxHalfOpenProbes   = 64
)

// Settings tunes a breaker. Every field's zero value means its default, so Settings{} is the
// recommended configuration. Durations are wall-clock spans; negative values are errors unless a
// field says otherwise.
type Settings struct {
	// FailureThreshold is how many failures inside Window trip a CLOSED breaker. Default 3, at most
	// MaxFailureThreshold. Memory is one int64 per unit of threshold.
	FailureThreshold int
	// Window is the rolling span failures are counted over. Default 60 s.
	Window time.Duration
	// FailureRatio, when in (0, 1], adds a condition for busy breakers: once the window holds at least
	// MinVolume verdicts, the breaker trips only if this share of them failed, so 3 failures among
	// 1,000 successes are noise. Zero disables it (the count alone decides).
	FailureRatio float64
	// MinVolume is the number of verdicts in the window from which FailureRatio applies. Default 20.
	MinVolume int
	// BaseCooldown is the first OPEN window. Default 20 s.
	BaseCooldown time.Duration
	// MaxCooldown caps the doubling of the OPEN window (before jitter). Default 15 min, or
	// BaseCooldown if that is longer.
	MaxCooldown time.Duration
	// Jitter lengthens every OPEN window by a random fraction of itself in [0, Jitter), so breakers
	// tripped together do not probe together. Default 0.25; negative disables jitter; at most 1.
	Jitter float64
	// ParkFor is how long a permanent failure keeps the breaker OPEN (plus jitter). Default MaxCooldown.
	ParkFor time.Duration
	// MaxRetryAfter caps a Retry-After, so a hostile "Retry-After: 99999999" cannot park a pair for
	// years. Default 1 h.
	MaxRetryAfter time.Duration
	// StablePeriod is how long a breaker must stay CLOSED for its backoff level to fall by one.
	// Default 5 min. Negative forgets the level as soon as the breaker closes (classic breakers).
	StablePeriod time.Duration
	// HalfOpenProbes is how many probes may be in flight in HALF_OPEN. Default 1, at most 64.
	HalfOpenProbes int
	// SuccessesToClose is how many successful probes close a HALF_OPEN breaker. Default 1.
	SuccessesToClose int
	// ProbeLease is how long a probe may hold its slot without a verdict before it counts as a failed
	// probe. Default 30 s; Acquire callers may pass a per-request lease (the request's timeout).
	ProbeLease time.Duration
	// Rand returns a uniform float64 in [0, 1) for jitter. It must be safe for concurrent use.
	// Default math/rand/v2.Float64.
	Rand func() float64
}

// Policy is a validated Settings, shared by any number of breakers. Build one with NewPolicy.
type Policy struct {
	s        Settings
	maxLevel int
}

// NewPolicy validates s, fills in defaults, and returns the Policy. The error names every bad field.
func NewPolicy(s Settings) (*Policy, error) {
	var errs []error
	bad := func(field string, v any, why string) {
		errs = append(errs, fmt.Errorf("breaker: Settings.%s = %v: %s", field, v, why))
	}
	switch {
	case s.FailureThreshold < 0:
		bad("FailureThreshold", s.FailureThreshold, "must not be negative")
	case s.FailureThreshold == 0:
		s.FailureThreshold = DefaultFailureThreshold
	case s.FailureThreshold > MaxFailureThreshold:
		bad("FailureThreshold", s.FailureThreshold, fmt.Sprintf("must be at most %d", MaxFailureThreshold))
	}
	s.Window = durationOr(s.Window, DefaultWindow, "Window", bad)
	if s.FailureRatio < 0 || s.FailureRatio > 1 || s.FailureRatio != s.FailureRatio {
		bad("FailureRatio", s.FailureRatio, "must be in [0, 1]")
	}
	switch {
	case s.MinVolume < 0:
		bad("MinVolume", s.MinVolume, "must not be negative")
	case s.MinVolume == 0:
		s.MinVolume = DefaultMinVolume
	}
	s.BaseCooldown = durationOr(s.BaseCooldown, DefaultBaseCooldown, "BaseCooldown", bad)
	s.MaxCooldown = durationOr(s.MaxCooldown, max(DefaultMaxCooldown, s.BaseCooldown), "MaxCooldown", bad)
	if s.MaxCooldown < s.BaseCooldown {
		bad("MaxCooldown", s.MaxCooldown, fmt.Sprintf("must not be shorter than BaseCooldown (%v)", s.BaseCooldown))
	}
	switch {
	case s.Jitter == 0:
		s.Jitter = DefaultJitter
	case s.Jitter < 0:
		s.Jitter = 0
	case s.Jitter > 1 || s.Jitter != s.Jitter:
		bad("Jitter", s.Jitter, "must be at most 1")
	}
	s.ParkFor = durationOr(s.ParkFor, s.MaxCooldown, "ParkFor", bad)
	s.MaxRetryAfter = durationOr(s.MaxRetryAfter, DefaultMaxRetryAfter, "MaxRetryAfter", bad)
	if s.StablePeriod == 0 {
		s.StablePeriod = DefaultStablePeriod
	}
	switch {
	case s.HalfOpenProbes < 0 || s.HalfOpenProbes > MaxHalfOpenProbes:
		bad("HalfOpenProbes", s.HalfOpenProbes, fmt.Sprintf("must be in [0, %d]", MaxHalfOpenProbes))
	case s.HalfOpenProbes == 0:
		s.HalfOpenProbes = DefaultHalfOpenProbes
	}
	switch {
	case s.SuccessesToClose < 0:
		bad("SuccessesToClose", s.SuccessesToClose, "must not be negative")
	case s.SuccessesToClose == 0:
		s.SuccessesToClose = DefaultSuccessesToClose
	}
	s.ProbeLease = durationOr(s.ProbeLease, DefaultProbeLease, "ProbeLease", bad)
	if s.Rand == nil {
		s.Rand = rand.Float64
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p := &Policy{s: s, maxLevel: 1}
	for p.maxLevel < 62 && doubled(s.BaseCooldown, s.MaxCooldown, p.maxLevel) < s.MaxCooldown {
		p.maxLevel++
	}
	return p, nil
}

// doubled returns min(base·2^(level-1), limit) without overflowing: a shift that would pass limit
// (and perhaps wrap negative) returns limit instead.
func doubled(base, limit time.Duration, level int) time.Duration {
	shift := max(level, 1) - 1
	if shift >= 63 || base > limit>>shift {
		return limit
	}
	return base << shift
}

func durationOr(d, def time.Duration, field string, bad func(string, any, string)) time.Duration {
	switch {
	case d < 0:
		bad(field, d, "must not be negative")
		return def
	case d == 0:
		return def
	}
	return d
}

// Settings returns the validated settings, defaults filled in.
func (p *Policy) Settings() Settings { return p.s }

// Cooldown returns the OPEN window, before jitter, for backoff level (1 for a first trip).
func (p *Policy) Cooldown(level int) time.Duration {
	if level < 1 {
		level = 1
	}
	if level > p.maxLevel {
		return p.s.MaxCooldown
	}
	return doubled(p.s.BaseCooldown, p.s.MaxCooldown, level)
}

// jittered lengthens d by a random fraction of itself in [0, Jitter).
func (p *Policy) jittered(d time.Duration) time.Duration {
	if p.s.Jitter == 0 {
		return d
	}
	r := p.s.Rand()
	if r < 0 || r >= 1 || r != r {
		r = 0 // a broken source must not shorten or explode a window
	}
	// Jitter <= 1 and r < 1 keep the product below d, so it converts back without overflow; the sum
	// saturates rather than wrapping for windows near the largest Duration.
	return time.Duration(addSat(int64(d), int64(float64(d)*p.s.Jitter*r)))
}

// MaxLevel is the backoff level at which Cooldown reaches MaxCooldown.
func (p *Policy) MaxLevel() int { return p.maxLevel }

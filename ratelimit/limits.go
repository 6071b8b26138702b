package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"
)

// Limit is a token bucket's shape: Rate tokens a second, up to Burst at once. The zero Limit means
// no limit. A positive Rate needs a Burst of at least 1.
type Limit struct {
	Rate  rate.Limit
	Burst int
}

// Every is shorthand for a Limit of one request per interval, with a burst of 1.
func Every(interval time.Duration) Limit { return Limit{Rate: rate.Every(interval), Burst: 1} }

// PerSecond is shorthand for a Limit of n requests a second with the given burst.
func PerSecond(n float64, burst int) Limit { return Limit{Rate: rate.Limit(n), Burst: burst} }

// IsZero reports whether l is the zero Limit (no limit).
func (l Limit) IsZero() bool { return l.Rate == 0 && l.Burst == 0 }

func (l Limit) check(what string) error {
	switch {
	case l.IsZero():
		return nil
	case math.IsNaN(float64(l.Rate)) || l.Rate <= 0:
		return fmt.Errorf("ratelimit: %s: rate %v must be positive (or the whole Limit zero for none)", what, float64(l.Rate))
	case l.Rate == rate.Inf:
		return nil
	case l.Burst < 1:
		return fmt.Errorf("ratelimit: %s: burst %d must be at least 1", what, l.Burst)
	}
	return nil
}

// Limits says which buckets apply. The zero Limits limits nothing (but still adapts: see Adaptive).
type Limits struct {
	// PerExit applies to every exit without an entry in Exits.
	PerExit Limit
	// Exits overrides PerExit by exit label (a premium exit may get a higher rate).
	Exits map[string]Limit
	// PerPair applies to every (exit, origin) pair.
	PerPair Limit
	// PerOrigin applies to every origin without an entry in Origins, across all exits.
	PerOrigin Limit
	// Origins overrides PerOrigin by origin key (as the transport's OriginFunc makes it).
	Origins map[string]Limit
	// Adaptive tunes the pace adaptation of pairs on 429s and challenge pages.
	Adaptive Adaptive
	// FailFast makes a request that finds no token fail at once with a *ThrottledError that says
	// how long it would have waited, instead of waiting. A budget kept by a Source (ExitSource)
	// refuses only when it has no token to give: tokens on their way (store/redis: a lease in
	// flight while the store is healthy) are waited for, at most the bound the Source documents,
	// not refused.
	FailFast bool
	// ExitSource, when set, is asked once per limited exit (as the exit joins the pool) for a Source
	// to draw that exit's tokens from instead of a local bucket — a fleet's shared budget, such as
	// store/redis's (*Store).ExitSource. PerExit and Exits then describe the budget the Source
	// enforces, and the Source may answer nil to keep a local bucket. Nil: every bucket is local.
	ExitSource func(label string, l Limit) Source
}

// Adaptive tunes AIMD per pair. Zero values mean the defaults.
type Adaptive struct {
	// Disabled turns adaptation off.
	Disabled bool
	// Decrease is the factor a 429 or challenge multiplies the pair's rate by. Default 0.5.
	Decrease float64
	// Floor is the lowest rate a cut can reach. Default one request a minute.
	Floor rate.Limit
	// Step is the share of the ceiling each success adds back. Default 0.05 (a twentieth).
	Step float64
	// Ceiling is the rate of a pair whose exit and pair have no configured rate. Default 10/s.
	Ceiling rate.Limit
}

// Defaults for Adaptive.
const (
	DefaultDecrease = 0.5
	DefaultStep     = 0.05
)

// Defaults for Adaptive rates.
var (
	DefaultFloor   = rate.Every(time.Minute)
	DefaultCeiling = rate.Limit(10)
)

// validate fills defaults and reports every bad field.
func (l *Limits) validate() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(l.PerExit.check("PerExit"))
	add(l.PerPair.check("PerPair"))
	add(l.PerOrigin.check("PerOrigin"))
	for label, lim := range l.Exits {
		add(lim.check(fmt.Sprintf("Exits[%q]", label)))
	}
	for origin, lim := range l.Origins {
		add(lim.check(fmt.Sprintf("Origins[%q]", origin)))
	}
	a := &l.Adaptive
	switch {
	case a.Decrease == 0:
		a.Decrease = DefaultDecrease
	case !(a.Decrease > 0 && a.Decrease < 1):
		add(fmt.Errorf("ratelimit: Adaptive.Decrease = %v: must be in (0, 1)", a.Decrease))
	}
	switch {
	case a.Step == 0:
		a.Step = DefaultStep
	case !(a.Step > 0 && a.Step <= 1):
		add(fmt.Errorf("ratelimit: Adaptive.Step = %v: must be in (0, 1]", a.Step))
	}
	switch {
	case a.Floor == 0:
		a.Floor = DefaultFloor
	case !(a.Floor > 0) || a.Floor == rate.Inf:
		add(fmt.Errorf("ratelimit: Adaptive.Floor = %v: must be a positive, finite rate", float64(a.Floor)))
	}
	switch {
	case a.Ceiling == 0:
		a.Ceiling = DefaultCeiling
	case !(a.Ceiling > 0) || a.Ceiling == rate.Inf:
		add(fmt.Errorf("ratelimit: Adaptive.Ceiling = %v: must be a positive, finite rate", float64(a.Ceiling)))
	}
	if a.Floor > a.Ceiling {
		add(fmt.Errorf("ratelimit: Adaptive.Floor %v is above Adaptive.Ceiling %v", float64(a.Floor), float64(a.Ceiling)))
	}
	return errors.Join(errs...)
}

package pool

import (
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// Per-exit breaker settings: an Exit may carry settings of its own for its pair breakers (one per
// origin) and for its exit breaker, layered over the pool's. Per-origin settings are in
// origins.go; how the two combine is resolved here, once per exit and per pattern, so that a pick
// reads no settings at all: a pair's breaker is made with its effective policy when the pair
// first needs one, and keeps it.
//
// Precedence, field by field — each non-zero field replaces what the layer below set:
//
//	pair breaker:  WithPairSettings  ←  Exit.WithPairSettings  ←  WithOriginSettings patterns (least specific first)
//	exit breaker:  WithExitSettings  ←  Exit.WithExitSettings
//
// The origin's layer wins over the exit's: a pair breaker judges how the site treats one IP, and a
// site's ban window and tolerance are facts about the site that hold for every IP; an exit's
// quality is judged by its own breaker, which origin patterns never touch.

// exitOverride is what an Exit carries: its own pair and exit settings, as given (zero fields
// inherit). Shared by the copies the With methods make; never modified.
type exitOverride struct {
	pair, exit breaker.Settings
}

// WithPairSettings returns a copy of e whose (exit, origin) breakers take s over the pool's pair
// settings (WithPairSettings): each non-zero field of s replaces the pool's; the other fields keep
// it. An origin's settings (WithOriginSettings) take precedence over s, field by field. The
// settings are validated when the exit joins a pool (New, Add, Sync), with the pool's and every
// origin pattern's settings: an error names the exit. breaker.Settings{} removes the override.
// In a proxy list: failures=, window=, cooldown=, max-cooldown=, park= (see ReadExits).
//
// A pair's breaker takes its settings when it is made (on the pair's first failure); Sync of an
// exit whose settings changed remakes its breakers with the new ones, keeping their state (see
// Sync).
func (e *Exit) WithPairSettings(s breaker.Settings) *Exit {
	c := *e
	o := e.override()
	o.pair = s
	c.over = o.orNil()
	return &c
}

// WithExitSettings returns a copy of e whose own breaker — the one for exit-scoped trouble and
// connection-level failures across origins — takes s over the pool's exit settings
// (WithExitSettings), field by field as for WithPairSettings. Origin patterns never change it.
// breaker.Settings{} removes the override. In a proxy list: exit-failures=, exit-window=,
// exit-cooldown=, exit-max-cooldown=, exit-park=.
func (e *Exit) WithExitSettings(s breaker.Settings) *Exit {
	c := *e
	o := e.override()
	o.exit = s
	c.over = o.orNil()
	return &c
}

// PairSettings returns the exit's own pair settings as given to WithPairSettings (zero fields
// inherit); breaker.Settings{} if it has none.
func (e *Exit) PairSettings() breaker.Settings { return e.override().pair }

// ExitSettings returns the exit's own exit-breaker settings as given to WithExitSettings;
// breaker.Settings{} if it has none.
func (e *Exit) ExitSettings() breaker.Settings { return e.override().exit }

func (e *Exit) override() exitOverride {
	if e.over == nil {
		return exitOverride{}
	}
	return *e.over
}

// orNil returns o as a shared pointer, or nil when it overrides nothing: an exit without
// overrides costs no pointer chase anywhere.
func (o exitOverride) orNil() *exitOverride {
	if isZero(o.pair) && isZero(o.exit) {
		return nil
	}
	return &o
}

// sameOverride reports whether a and b carry the same settings. Most exits carry none, and
// copies share the pointer: those cost a comparison of pointers.
func sameOverride(a, b *exitOverride) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return sameSettings(a.pair, b.pair) && sameSettings(a.exit, b.exit)
}

// overlay returns base with every non-zero field of over put in its place. It is generic over the
// settings structs (breaker.Settings, OriginGuardSettings) and reads their fields by reflection,
// so a field added to breaker.Settings is layered without a change here. It runs when a pool is
// made and when a pair's or exit's policy is resolved, never on a pick.
func overlay[T any](base, over T) T {
	b := reflect.ValueOf(&base).Elem()
	o := reflect.ValueOf(over)
	for i := range o.NumField() {
		if f := o.Field(i); !f.IsZero() && b.Field(i).CanSet() {
			b.Field(i).Set(f)
		}
	}
	return base
}

func isZero[T any](s T) bool { return reflect.ValueOf(s).IsZero() }

// sameSettings reports whether a and b set the same fields to the same values; functions (Rand)
// compare by their code pointer.
func sameSettings[T any](a, b T) bool {
	x, y := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range x.NumField() {
		f, g := x.Field(i), y.Field(i)
		if f.Kind() == reflect.Func {
			if f.IsNil() != g.IsNil() || (!f.IsNil() && f.Pointer() != g.Pointer()) {
				return false
			}
			continue
		}
		if !f.Equal(g) {
			return false
		}
	}
	return true
}

// exitTuning is an exit's overrides resolved against the pool: the policies its breakers are made
// with. Nil for an exit without overrides. Immutable once made, except for the lazily filled
// byRule cache.
type exitTuning struct {
	over    *exitOverride
	pairPol *breaker.Policy // pool pair ← exit's pair settings; nil when it has none
	exitPol *breaker.Policy // pool exit ← exit's exit settings; nil when it has none
	// eager: the exit's pair settings count successes (FailureRatio), so its pairs need a breaker
	// from their first pick rather than from their first failure.
	eager bool
	// byRule[r.index] is pairPol under origin rule r, made on first use: a pattern with pair
	// settings of its own and an exit with its own make a policy of their own.
	byRule []atomic.Pointer[breaker.Policy]
}

// tuneExit resolves e's overrides against the pool's settings and every origin pattern, and
// validates each combination, so that nothing can fail once the exit is in. Nil, nil for an exit
// without overrides.
func (p *Pool) tuneExit(e *Exit) (*exitTuning, error) {
	o := e.over
	if o == nil {
		return nil, nil
	}
	t := &exitTuning{over: o}
	if !isZero(o.pair) {
		s := overlay(p.pairRaw, o.pair)
		pol, err := breaker.NewPolicy(s)
		if err != nil {
			return nil, fmt.Errorf("pool: exit %s: pair settings: %w", e.label, err)
		}
		t.pairPol, t.eager = pol, pol.Settings().FailureRatio > 0
		for _, r := range p.rules {
			if !r.hasPair {
				continue
			}
			if _, err := breaker.NewPolicy(overlay(s, r.pairSet)); err != nil {
				return nil, fmt.Errorf("pool: exit %s: pair settings under WithOriginSettings(%q): %w", e.label, r.pattern, err)
			}
		}
		t.byRule = make([]atomic.Pointer[breaker.Policy], len(p.rules))
	}
	if !isZero(o.exit) {
		pol, err := breaker.NewPolicy(overlay(p.exitRaw, o.exit))
		if err != nil {
			return nil, fmt.Errorf("pool: exit %s: exit settings: %w", e.label, err)
		}
		t.exitPol = pol
	}
	return t, nil
}

// tuneExits resolves the overrides of exits (validated by checkExits: none nil), in their order.
// The error names every exit whose settings are wrong.
func (p *Pool) tuneExits(exits []*Exit) ([]*exitTuning, error) {
	out := make([]*exitTuning, len(exits))
	var errs []error
	for i, e := range exits {
		t, err := p.tuneExit(e)
		if err != nil {
			errs = append(errs, err)
		}
		out[i] = t
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// exitPolicy returns the policy of the exit breaker of an exit tuned t.
func (p *Pool) exitPolicy(t *exitTuning) *breaker.Policy {
	if t == nil || t.exitPol == nil {
		return p.exitPol
	}
	return t.exitPol
}

// pairPolicy returns the policy a pair of origin o and an exit tuned t is made with.
func (p *Pool) pairPolicy(o *originState, t *exitTuning) *breaker.Policy {
	r := o.rule
	if t == nil || t.pairPol == nil {
		if r == nil {
			return p.pairPol
		}
		return r.pairPol
	}
	if r == nil || !r.hasPair {
		return t.pairPol
	}
	slot := &t.byRule[r.index]
	if pol := slot.Load(); pol != nil {
		return pol
	}
	pol, err := breaker.NewPolicy(overlay(overlay(p.pairRaw, t.over.pair), r.pairSet))
	if err != nil {
		pol = t.pairPol // unreachable: tuneExit validated this combination when the exit joined
	}
	slot.CompareAndSwap(nil, pol)
	return slot.Load()
}

package pool

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// WantTier is the one key a Want may name that is no attribute: the exit's tier (Exit.Tier), a
// decimal integer. "tier=1" wants exits of tier 1 only; "tier=0,1" either. The tier's place in the
// pick is kept: among the matching exits, lower tiers are preferred as among all.
const WantTier = "tier"

// checkWantMatch validates one value a Want asks of key: an attribute's (attrs.go), or a tier.
func checkWantMatch(key, value string) error {
	if key != WantTier {
		return checkAttr(key, value)
	}
	if _, err := strconv.Atoi(value); err != nil || value == "" || len(value) > 9 {
		return fmt.Errorf("tier %q: want a decimal integer", value)
	}
	return nil
}

// Want is what a request needs of its exit: attributes that must match (attrs.go). Build it once
// (ParseWant, NewWant) and reuse it: equal Wants are one value (interned), and the pool indexes
// its exits for each Want it meets, once per exit set, so that a constrained pick draws among the
// matching exits only and costs what an unconstrained one does. A Want is immutable and safe for
// concurrent use. The nil *Want wants nothing: every exit matches.
//
// The constraint narrows the candidates; it does not split the breakers' state: a pair's breaker
// is the same whichever Want led a request to it, and tiers, weights, least-loaded choice,
// sessions and retries apply among the matching exits as among all.
type Want struct {
	matches []Match // sorted by key, values sorted and lower-cased
	text    string  // canonical form
	// last caches the view of the exit set this Want was last picked in.
	last atomic.Pointer[wantViewRef]
}

// Match is one attribute a Want needs: the exit's value for Key is one of Values (any of them,
// compared without regard to ASCII case).
type Match struct {
	Key    string
	Values []string
}

// ErrNoMatchingExit is matched by *NoMatchingExitError: no exit of the pool has what the request
// wants — a configuration fault, not a passing state. (When matching exits exist but none is
// ready, the pick fails with a *NoHealthyExitError, with RetryIn, as without a Want.)
var ErrNoMatchingExit = errors.New("pool: no exit matches")

// NoMatchingExitError is the error of a pick whose Want no exit of the pool matches.
type NoMatchingExitError struct {
	Origin string
	Want   string // the Want's canonical form
	Exits  int    // exits in the pool
	// Exit, when set, is the label of the exit the request was pinned to (Request.Exit), which
	// does not match the Want.
	Exit string
}

// Error says what was wanted and how many exits there were (or which pinned exit did not match).
func (e *NoMatchingExitError) Error() string {
	if e.Exit != "" {
		return fmt.Sprintf("pool: exit %s does not match %s (Request.Exit for %s)", e.Exit, e.Want, e.Origin)
	}
	return fmt.Sprintf("pool: no exit matches %s for %s (%d exits in the pool)", e.Want, e.Origin, e.Exits)
}

// Is reports whether target is ErrNoMatchingExit.
func (e *NoMatchingExitError) Is(target error) bool { return target == ErrNoMatchingExit }

// wants interns Wants by canonical form, so that a Want built again is the one built before (and
// its views are not built again). It grows with the distinct Wants a program writes.
var wants sync.Map // string → *Want

// ParseWant parses a Want written as space-separated matches, each key=value or key=v1,v2,…
// (any of): "country=us,ca kind=residential". Keys and values follow the attribute alphabet
// (attrs.go); a key may appear once. The empty string is the nil Want.
func ParseWant(s string) (*Want, error) {
	var ms []Match
	for f := range strings.FieldsSeq(s) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("pool: want %q: %q: want key=value or key=v1,v2", s, f)
		}
		ms = append(ms, Match{Key: k, Values: strings.Split(v, ",")})
	}
	w, err := NewWant(ms...)
	if err != nil {
		return nil, fmt.Errorf("pool: want %q: %s", s, strings.TrimPrefix(err.Error(), "pool: want: "))
	}
	return w, nil
}

// MustParseWant is ParseWant that panics on an error: for Wants written in the program's source.
func MustParseWant(s string) *Want {
	w, err := ParseWant(s)
	if err != nil {
		panic(err)
	}
	return w
}

// NewWant returns the Want of ms (all must hold). No matches is the nil Want.
func NewWant(ms ...Match) (*Want, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	norm := make([]Match, 0, len(ms))
	for _, m := range ms {
		if len(m.Values) == 0 {
			return nil, fmt.Errorf("pool: want: attribute %s: no value", m.Key)
		}
		vs := make([]string, 0, len(m.Values))
		for _, v := range m.Values {
			if err := checkWantMatch(m.Key, v); err != nil {
				return nil, fmt.Errorf("pool: want: %w", err)
			}
			vs = append(vs, strings.ToLower(v))
		}
		slices.Sort(vs)
		norm = append(norm, Match{Key: m.Key, Values: slices.Compact(vs)})
	}
	slices.SortFunc(norm, func(a, b Match) int { return strings.Compare(a.Key, b.Key) })
	for i := 1; i < len(norm); i++ {
		if norm[i].Key == norm[i-1].Key {
			return nil, fmt.Errorf("pool: want: attribute %s twice (list its values once: %s=a,b)", norm[i].Key, norm[i].Key)
		}
	}
	parts := make([]string, len(norm))
	for i, m := range norm {
		parts[i] = m.Key + "=" + strings.Join(m.Values, ",")
	}
	w := &Want{matches: norm, text: strings.Join(parts, " ")}
	if prev, loaded := wants.LoadOrStore(w.text, w); loaded {
		return prev.(*Want), nil
	}
	return w, nil
}

// String returns the Want's canonical form: matches sorted by key, values sorted and lower-cased.
// The nil Want is "".
func (w *Want) String() string {
	if w == nil {
		return ""
	}
	return w.text
}

// Matches returns a copy of the Want's matches, in canonical order.
func (w *Want) Matches() []Match {
	if w == nil {
		return nil
	}
	out := make([]Match, len(w.matches))
	for i, m := range w.matches {
		out[i] = Match{Key: m.Key, Values: slices.Clone(m.Values)}
	}
	return out
}

// Admits reports whether exit e has what w wants. The nil Want admits every exit.
func (w *Want) Admits(e *Exit) bool {
	if w == nil {
		return true
	}
	for _, m := range w.matches {
		v, ok := e.Attr(m.Key)
		if m.Key == WantTier {
			v, ok = strconv.Itoa(e.tier), true
		}
		if !ok || !slices.ContainsFunc(m.Values, func(x string) bool { return strings.EqualFold(x, v) }) {
			return false
		}
	}
	return true
}

package probe

import (
	"cmp"
	"slices"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// DefaultParkFor is how long StateFrom parks an exit that failed permanently: the breaker's own
// default ParkFor (its MaxCooldown).
const DefaultParkFor = breaker.DefaultMaxCooldown

// StateSettings tunes StateFrom. The zero value is the defaults.
type StateSettings struct {
	// ParkFor is how long an exit (or pair) that failed permanently stays parked from now. Default
	// DefaultParkFor (15 min); keep it equal to the pool's breaker ParkFor.
	ParkFor time.Duration
	// MaxRetryAfter caps the Retry-After windows, as breaker.Settings.MaxRetryAfter does. Default
	// 1 h.
	MaxRetryAfter time.Duration
}

// StateFrom turns r into a pool.SavedState that a pool.Pool loads with Restore to warm start,
// as the probe's failures would have left its breakers:
//
//   - an exit with an exit-scoped permanent failure (407, gateway refused, proxy DNS, CONNECT
//     refused, SOCKS credentials rejected) starts parked: ScopeExit, OPEN and Parked until
//     now + ParkFor;
//   - a pair whose probe failed with a Retry-After (a 429, or a 403/503 or challenge page that
//     carried one) starts OPEN until now + Retry-After, as the breaker trips on any failure that
//     carries one; a pair-scoped permanent failure (from a custom classifier) parks the pair.
//
// Everything else is left out: a fresh breaker is CLOSED. Entries are keyed by exit label and
// origin key, so the Pool must use the same labels (the same proxy list) and origin keys
// (Config.OriginKey). The state holds no credentials.
func StateFrom(r *Report, now time.Time, s StateSettings) pool.SavedState {
	park := s.ParkFor
	if park <= 0 {
		park = DefaultParkFor
	}
	maxRA := s.MaxRetryAfter
	if maxRA <= 0 {
		maxRA = breaker.DefaultMaxRetryAfter
	}
	st := pool.SavedState{Version: pool.SavedStateVersion, Saved: now, Breakers: []pool.SavedBreaker{}}
	type key struct {
		scope        pool.Scope
		exit, origin string
	}
	at := map[key]int{} // index in st.Breakers
	put := func(sb pool.SavedBreaker) {
		k := key{sb.Scope, sb.Exit, sb.Origin}
		i, ok := at[k]
		if !ok {
			at[k] = len(st.Breakers)
			st.Breakers = append(st.Breakers, sb)
			return
		}
		// Of two entries for one breaker: parked beats OPEN, then the longer window.
		old := st.Breakers[i]
		if sb.Parked != old.Parked && sb.Parked || sb.Parked == old.Parked && sb.NextProbe.After(old.NextProbe) {
			st.Breakers[i] = sb
		}
	}
	for _, res := range r.Results {
		switch {
		case res.Outcome == pool.Permanent && res.Scope == pool.ScopeExit:
			put(pool.SavedBreaker{Scope: pool.ScopeExit, Exit: res.Exit, Saved: breaker.Saved{
				State: breaker.Open, Parked: true, NextProbe: now.Add(park), LastFailure: string(res.Class), Changed: now,
			}})
		case res.Outcome == pool.Permanent && res.Scope == pool.ScopePair:
			put(pool.SavedBreaker{Scope: pool.ScopePair, Exit: res.Exit, Origin: res.Origin, Saved: breaker.Saved{
				State: breaker.Open, Parked: true, NextProbe: now.Add(park), LastFailure: string(res.Class), Changed: now,
			}})
		case res.Outcome == pool.Transient && res.Scope == pool.ScopePair && res.RetryAfterMS > 0:
			ra := min(time.Duration(res.RetryAfterMS)*time.Millisecond, maxRA)
			put(pool.SavedBreaker{Scope: pool.ScopePair, Exit: res.Exit, Origin: res.Origin, Saved: breaker.Saved{
				State: breaker.Open, Trips: 1, NextProbe: now.Add(ra), LastFailure: string(res.Class), Changed: now,
			}})
		}
	}
	slices.SortFunc(st.Breakers, func(a, b pool.SavedBreaker) int {
		return cmp.Or(cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Exit, b.Exit), cmp.Compare(a.Origin, b.Origin))
	})
	return st
}

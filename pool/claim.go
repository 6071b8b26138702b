package pool

import (
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// ProbeClaimer is consulted whenever the pool is about to send a HALF_OPEN probe — of a pair, an
// exit or an origin guard — so that a fleet of pools sends one probe per key instead of one per
// member (package store/redis implements it). ClaimProbe runs on the request path and must be
// quick; false means another member holds the probe, and the pool treats the key as not ready
// (a live request picks another exit). lease is how long the claim needs to last: the probe's
// own lease.
type ProbeClaimer interface {
	ClaimProbe(now time.Time, target ProbeTarget, lease time.Duration) bool
}

// claimProbes claims the probes t holds (its pair's, its exit's) with the pool's claimer.
func (p *Pool) claimProbes(now time.Time, o *originState, es *exitState, t *ticket, lease time.Duration) bool {
	if t.exitPm.Probe() && !p.claimer.ClaimProbe(now, ProbeTarget{Scope: ScopeExit, Exit: es.exit}, lease) {
		return false
	}
	if t.pairPm.Probe() {
		if pol := t.pair.b.Policy(); pol != p.pairPol {
			lease = pol.Settings().ProbeLease // an origin's or an exit's own settings
		}
		if !p.claimer.ClaimProbe(now, ProbeTarget{Scope: ScopePair, Exit: es.exit, Origin: o.key}, lease) {
			return false
		}
	}
	return true
}

// admitOrigin asks o's guard to admit a request, and claims the guard's probe when it is one.
func (p *Pool) admitOrigin(now time.Time, o *originState) (breaker.Permit, error) {
	pm, err := o.guard.admit(now, &o.key)
	if err != nil || p.claimer == nil || !pm.Probe() {
		return pm, err
	}
	lease := o.guard.cfg.policy.Settings().ProbeLease
	if p.claimer.ClaimProbe(now, ProbeTarget{Scope: ScopeOrigin, Origin: o.key}, lease) {
		return pm, nil
	}
	pm.Release(now)
	return breaker.Permit{}, &OriginUnhealthyError{Origin: o.key, RetryIn: lease}
}

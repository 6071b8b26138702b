package pool

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// CauseReplaced is the cause of the transitions Sync reports for an exit whose dialing URL changed
// under the same label: each breaker of the old proxy that held anything (not CLOSED, or a backoff
// level not yet decayed) is reported as CLOSED, with this cause, level 0 and no trips, because the
// label now names a fresh exit. Stores and status pages, which know exits by label, so forget the
// old proxy's state instead of restoring it into the new one after a restart.
const CauseReplaced breaker.Cause = "replaced"

// SyncResult counts what Sync did, by label.
type SyncResult struct {
	// Added counts labels new to the pool: fresh exits.
	Added int
	// Removed counts labels missing from the list: removed as Remove does.
	Removed int
	// Replaced counts labels whose dialing URL changed (scheme, host, port or credentials): the
	// label now names a different proxy, which starts with fresh breakers (see CauseReplaced).
	Replaced int
	// Updated counts labels whose tier, weight or breaker settings changed and nothing else: the
	// same proxy, which keeps its breakers' state, buckets, sessions and leases.
	Updated int
	// Kept counts labels that did not change at all: the pool keeps the *Exit it had.
	Kept int
}

// Changed reports whether Sync changed the exit set.
func (r SyncResult) Changed() bool { return r.Added+r.Removed+r.Replaced+r.Updated > 0 }

// String summarises r, for a log line: "added 1, removed 0, replaced 1, updated 0, kept 3".
func (r SyncResult) String() string {
	return fmt.Sprintf("added %d, removed %d, replaced %d, updated %d, kept %d",
		r.Added, r.Removed, r.Replaced, r.Updated, r.Kept)
}

// Sync makes exits the pool's exit set, matching them to the pool's exits by label and keeping
// the state of every exit that is still the same proxy — for a proxy list reloaded while traffic
// flows (see Reloader). For each label:
//
//   - in the pool with the same dialing URL, tier and weight: kept, *Exit and all (Kept);
//   - in the pool with the same dialing URL but another tier, weight or breaker settings
//     (Exit.WithPairSettings, Exit.WithExitSettings; failures=, cooldown=, … in a list): the new
//     *Exit takes the old one's place and its state — exit and pair breakers, token buckets,
//     session pins, leases out and their counts (Updated). Breakers whose settings changed are
//     remade with the new ones and take over the old ones' state, clamped to what the new
//     settings could produce, as a restore is; failures counted toward a trip and probes in
//     flight are forgotten, and observers hear no transition for it;
//   - in the pool with another dialing URL, credentials included: a different proxy under the same
//     label. The old exit is removed and the new one starts fresh, with new breakers and buckets;
//     sessions pinned to the old one pick again (Replaced). A new password is a new exit, so a
//     list that fixes the credentials of an exit parked for proxy_auth brings it back at once;
//   - not in the pool: added (Added) — fresh, or with the state it left with if the same proxy was
//     removed under this label within retention (see Remove);
//   - in the pool but not in exits: removed as Remove does (Removed).
//
// Validation is all or nothing, as for Add: a nil exit, a label twice in exits or a weight that is
// not positive and finite is an error naming each, and the pool is left as it was. Labels only
// need to be unique within exits. An empty exits removes every exit. Afterwards Exits lists the
// pool's exits in the order of exits.
//
// Observers hear ExitRemoved for every *Exit that leaves the pool: each removed exit, the old
// exit of each replaced label, and the old *Exit of each updated one — its label stays, with its
// breakers, but a transport keeps connections per *Exit and closes the old one's idle ones. For
// each replaced label they also hear a CauseReplaced transition for every breaker of the old exit
// that held anything. All of it is delivered after the new set is in place, with no lock held.
//
// Sync is safe to call while picks and reports are in flight. A pick that started before Sync
// returned may still go through an exit Sync removed; its lease finishes normally, and the
// verdict of a lease on a removed or replaced exit counts only on that exit's old breakers,
// which report nothing to observers any more. Sync is serialised with Add and Remove.
func (p *Pool) Sync(exits []*Exit) (SyncResult, error) {
	p.mu.Lock()
	old := p.set.Load()
	exits, made, kept, err := p.expandGateways(exits, nil, true) // templates → sessions (gateway.go)
	if err != nil {
		p.mu.Unlock()
		return SyncResult{}, err
	}
	if err := checkExits(exits, nil); err != nil {
		p.mu.Unlock()
		return SyncResult{}, err
	}
	tunes, err := p.syncTunes(old, exits)
	if err != nil {
		p.mu.Unlock()
		return SyncResult{}, err
	}
	var (
		rs       retunes
		res      SyncResult
		all      = make([]*exitState, 0, len(exits))
		listed   = make(map[string]bool, len(exits))
		removed  []*exitState // retired, observers told
		dropped  []*exitState // replaced: forgotten, observers told
		updated  []*Exit      // old *Exit of an updated label: observers told
		replaced []replacement
	)
	for i, e := range exits {
		listed[e.label] = true
		cur := old.byLabel[e.label]
		switch {
		case cur == nil:
			all = append(all, p.joinExit(e, tunes.at(i), &rs))
			res.Added++
		case !sameProxy(cur.exit, e):
			fresh := p.newExitState(e, tunes.at(i))
			all = append(all, fresh)
			dropped = append(dropped, cur)
			replaced = append(replaced, replacement{old: cur, exit: e})
			res.Replaced++
		case cur.exit.tier != e.tier || cur.exit.weight != e.weight || !sameOverride(cur.exit.over, e.over) || !sameAttrs(cur.exit, e):
			// Same id, breakers (remade if its settings changed), bucket and life.
			all = append(all, p.retune(cur, e, tunes.at(i), &rs))
			updated = append(updated, cur.exit)
			res.Updated++
		default:
			all = append(all, cur)
			res.Kept++
		}
	}
	for _, es := range old.all {
		if !listed[es.exit.label] {
			removed = append(removed, es)
			res.Removed++
		}
	}
	if res.Changed() || !sameOrder(old.all, all) {
		p.set.Store(p.buildSet(all))
	}
	rs.finish(p)
	p.retire(removed, true)
	p.settleGateways(made, kept, true)
	for _, es := range dropped {
		p.gone.set(es.id, true)
	}
	p.mu.Unlock()

	// Read the old breakers before they are forgotten: a sweep may then drop their pairs.
	var resets []StateChange
	if len(replaced) > 0 {
		resets = p.replacedChanges(p.clock.Now(), replaced)
	}
	for _, es := range dropped {
		es.life.Store(lifeForgotten)
		p.forgotten.set(es.id, true)
	}
	p.tellRemoved(removed)
	p.tellRemoved(dropped)
	for _, e := range updated {
		p.obs.exitRemoved(e)
	}
	for _, c := range resets {
		p.obs.stateChanged(c)
	}
	return res, nil
}

// syncTunes resolves the settings of the exits Sync will add, replace or update, before it changes
// anything: the error names every exit whose settings are wrong. An exit that stays with the same
// settings keeps the tuning it has. The result is nil when no exit has settings of its own: a Sync
// of a list without breaker attributes pays nothing for them.
func (p *Pool) syncTunes(old *exitSet, exits []*Exit) (syncTuning, error) {
	var (
		out  syncTuning
		errs []error
	)
	for i, e := range exits {
		if e.over == nil {
			continue
		}
		if out == nil {
			out = make(syncTuning, len(exits))
		}
		if cur := old.byLabel[e.label]; cur != nil && sameProxy(cur.exit, e) && sameOverride(cur.exit.over, e.over) {
			out[i] = cur.tune
			continue
		}
		t, err := p.tuneExit(e)
		if err != nil {
			errs = append(errs, err)
		}
		out[i] = t
	}
	return out, errors.Join(errs...)
}

// syncTuning is the tuning of each exit of a Sync, in its order; nil when none has any.
type syncTuning []*exitTuning

func (s syncTuning) at(i int) *exitTuning {
	if s == nil {
		return nil
	}
	return s[i]
}

// sameProxy reports whether a and b dial the same proxy: the same URL, credentials included.
// An Exit's URL is only a scheme, a host:port and userinfo (checkProxyURL): comparing those, rather
// than String forms, keeps a Sync of 10,000 unchanged exits free of allocations per exit.
func sameProxy(a, b *Exit) bool {
	if a == b {
		return true
	}
	x, y := a.u, b.u
	if x.Scheme != y.Scheme || x.Host != y.Host || (x.User == nil) != (y.User == nil) {
		return false
	}
	if x.User == nil {
		return true
	}
	xp, xset := x.User.Password()
	yp, yset := y.User.Password()
	return x.User.Username() == y.User.Username() && xp == yp && xset == yset
}

func sameOrder(a, b []*exitState) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// replacement is a label whose dialing URL changed: the old exit's state and the new *Exit.
type replacement struct {
	old  *exitState
	exit *Exit
}

// replacedChanges returns the CauseReplaced transitions for the breakers of replaced exits that
// held anything at now, in the order of replaced (and of origins, for pairs).
func (p *Pool) replacedChanges(now time.Time, replaced []replacement) []StateChange {
	reset := func(b *breaker.Breaker) (breaker.Transition, bool) {
		if !b.Save(now).Worth() {
			return breaker.Transition{}, false
		}
		return breaker.Transition{From: b.State(now), To: breaker.Closed, At: now, Cause: CauseReplaced}, true
	}
	var out []StateChange
	for _, r := range replaced {
		if t, ok := reset(r.old.wide); ok {
			out = append(out, StateChange{Scope: ScopeExit, Exit: r.exit, Transition: t})
		}
	}
	origins := p.originList()
	slices.SortFunc(origins, func(a, b *originState) int { return cmp.Compare(a.key, b.key) })
	for _, o := range origins {
		o.mu.RLock()
		for _, r := range replaced {
			if pr := o.pairs[r.old.id]; pr != nil {
				if t, ok := reset(&pr.b); ok {
					out = append(out, StateChange{Scope: ScopePair, Exit: r.exit, Origin: o.key, Transition: t})
				}
			}
		}
		o.mu.RUnlock()
	}
	return out
}

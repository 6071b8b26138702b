package pool

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// groupHolds is one origin's memory of the groups (group.go) its bans touched: the recent bans of
// each group's members, and the holds in force. The zero value is ready; an origin that never
// banned a grouped exit keeps it empty, and a pick then reads one nil pointer of it.
type groupHolds struct {
	// held maps each held exit id to its group's hold. It is replaced whole, under mu, when a hold
	// starts or ends, so that a pick reads it with one atomic load and a map lookup; nil while
	// nothing is held.
	held  atomic.Pointer[map[uint32]*groupHold]
	mu    sync.Mutex
	watch map[string]*groupWatch // by group key, made at the origin's first ban of a grouped exit
	// rests counts the gateways' site rests holding the origin (gateway_rest.go): while any is
	// in force the idle sweep keeps the origin, and so the rest.
	rests atomic.Int32
}

// groupWatch is one group's recent bans by one origin, and its hold while one is in force.
type groupWatch struct {
	bans [maxGroupBans]groupBan
	hold *groupHold
}

type groupBan struct {
	exit uint32 // id + 1; 0 = empty
	at   int64
}

// groupHold is one group held for one origin: its held members may send one attempt at a time
// there (the probe), until one of the group is served.
type groupHold struct {
	key     string
	since   time.Time
	banned  []uint32 // the members whose bans started the hold
	members []uint32 // the members held
	// probe is the instant (UnixNano, never 0) the probe out was admitted at; 0: none. A probe
	// that gave no verdict within the pool's probe lease frees the slot.
	probe atomic.Int64
	// until (UnixNano), when not 0, shuts the slot until then: a gateway's site rest
	// (gateway_rest.go). Group holds leave it 0.
	until atomic.Int64
}

// heldOff reports whether exit id is held for the origin and its group's probe is out: the pick
// passes it over. For a pool without groups, and an origin with nothing held, it reads one
// pointer.
// holding reports whether any group is held for the origin: the pick asks, inlined, before it
// calls holdPick.
func (h *groupHolds) holding() bool { return h.held.Load() != nil }

func (h *groupHolds) heldOff(now time.Time, id uint32, lease time.Duration) bool {
	m := h.held.Load()
	return m != nil && heldIn(m, now, id, lease) // inlined: mostly nothing is held
}

func heldIn(m *map[uint32]*groupHold, now time.Time, id uint32, lease time.Duration) bool {
	g := (*m)[id]
	return g != nil && g.probeOut(now, lease)
}

func (g *groupHold) probeOut(now time.Time, lease time.Duration) bool {
	if u := g.until.Load(); u != 0 && now.UnixNano() < u {
		return true // resting: no probe yet
	}
	at := g.probe.Load()
	return at != 0 && now.UnixNano()-at < int64(lease)
}

// slotMark is the value a probe admitted at t holds the slot with.
func slotMark(t time.Time) int64 { return max(t.UnixNano(), 1) }

// take takes the hold's probe slot for an attempt admitted at now.
func (g *groupHold) take(now time.Time, lease time.Duration) bool {
	if u := g.until.Load(); u != 0 && now.UnixNano() < u {
		return false
	}
	for {
		at := g.probe.Load()
		if at != 0 && now.UnixNano()-at < int64(lease) {
			return false
		}
		if g.probe.CompareAndSwap(at, slotMark(now)) {
			return true
		}
	}
}

// holdPick completes a pick whose exit is held for the origin: the lease takes the group's probe
// slot, or, when another request took it between this pick's look and now, is given back and the
// pick made again (at most maxPickRounds times). A dry run takes no slot: it marks the lease as
// one the hold would have refused.
func (p *Pool) holdPick(ctx context.Context, now time.Time, r Request, l *Lease) error {
	for round := 1; ; round++ {
		m := l.t.origin.kin.held.Load()
		if m == nil {
			return nil
		}
		g := (*m)[l.t.id]
		switch {
		case g == nil:
			return nil
		case p.dryRun:
			l.t.would = l.t.would || g.probeOut(l.t.now, p.probeLease)
			return nil
		case g.take(l.t.now, p.probeLease):
			l.groupProbe = true
			return nil
		}
		p.release(l.t.now, &l.t)
		if round >= maxPickRounds {
			return &NoHealthyExitError{Origin: r.Origin, Exits: len(p.set.Load().all), Want: r.Want.String()}
		}
		l.t = ticket{}
		if err := p.pick(ctx, now, r, l); err != nil {
			return err
		}
	}
}

// groupsHear tells the origin's groups of a lease's end: it frees the group's probe slot if the
// lease held it, and a served answer releases its group's hold. It reads one pointer when the
// lease held no slot and the origin holds nothing.
func (p *Pool) groupsHear(t *ticket, served, probe bool) {
	if probe || (served && t.origin.kin.held.Load() != nil) { // inlined: mostly neither
		p.groupsHearHeld(t, served, probe)
	}
}

func (p *Pool) groupsHearHeld(t *ticket, served, probe bool) {
	h := &t.origin.kin
	if probe {
		if m := h.held.Load(); m != nil {
			if g := (*m)[t.id]; g != nil {
				g.probe.CompareAndSwap(slotMark(t.now), 0)
			}
		}
	}
	if served {
		p.groupServed(t.origin, t.id, t.now)
	}
}

// groupServed releases the hold of exit id's group for o: one of its members was served there.
func (p *Pool) groupServed(o *originState, id uint32, now time.Time) {
	set := p.set.Load()
	k := set.kin.groupOf(id)
	if k == nil {
		return
	}
	h := &o.kin
	h.mu.Lock()
	w := h.watch[k.key]
	if w == nil || w.hold == nil {
		h.mu.Unlock()
		return
	}
	g := w.hold
	*w = groupWatch{} // the hold's evidence is spent with it
	m := maps.Clone(*h.held.Load())
	maps.DeleteFunc(m, func(_ uint32, x *groupHold) bool { return x == g })
	if len(m) == 0 {
		m = nil
	}
	h.storeHeld(m)
	h.mu.Unlock()
	served := ""
	if es := set.byID[id]; es != nil {
		served = es.exit.label
	}
	p.tellGroup(set, o.key, g, now, true, served)
}

// forgetHolds ends the holds of an origin the idle sweep dropped at now: nothing was served, and
// nothing of the origin is remembered any more. Observers hear each end, with no ServedBy.
func (p *Pool) forgetHolds(o *originState, now time.Time) {
	h := &o.kin
	h.mu.Lock()
	var gone []*groupHold
	for _, w := range h.watch {
		if w.hold != nil {
			gone = append(gone, w.hold)
		}
	}
	h.watch = nil
	h.storeHeld(nil)
	h.mu.Unlock()
	set := p.set.Load()
	for _, g := range gone {
		p.tellGroup(set, o.key, g, now, true, "")
	}
}

func (h *groupHolds) storeHeld(m map[uint32]*groupHold) {
	if m == nil {
		h.held.Store(nil)
		return
	}
	h.held.Store(&m)
}

// noteGroupBan hears of the pair's transitions: a trip from CLOSED for a block is a ban of its
// exit by the origin, which counts towards its group's hold there.
func (pr *pair) noteGroupBan(t breaker.Transition) {
	if t.From != breaker.Closed || t.To != breaker.Open || t.Reason != string(ClassBlocked) {
		return
	}
	o := pr.origin
	p := o.pool
	set := p.set.Load()
	k := set.kin.groupOf(pr.id)
	if k == nil {
		return
	}
	if g := o.kin.banned(k, pr.id, t.At, p.groups); g != nil {
		p.tellGroup(set, o.key, g, t.At, false, "")
	}
}

// banned records a ban of member id of group k at now, and returns the hold it starts, if any:
// MinBans distinct members banned within Window hold the group's other members.
func (h *groupHolds) banned(k *kin, id uint32, now time.Time, s GroupSettings) *groupHold {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.watch == nil {
		h.watch = map[string]*groupWatch{}
	}
	w := h.watch[k.key]
	if w == nil {
		w = &groupWatch{}
		h.watch[k.key] = w
	}
	if w.hold != nil {
		return nil // held already: its probes are what is being banned
	}
	at := now.UnixNano()
	slot := 0
	for i, b := range w.bans {
		if b.exit == id+1 {
			slot = i
			break
		}
		if b.at < w.bans[slot].at {
			slot = i
		}
	}
	w.bans[slot] = groupBan{exit: id + 1, at: at}
	var banned []uint32
	for _, b := range w.bans {
		if b.exit != 0 && b.at > at-int64(s.Window) && b.at <= at {
			banned = append(banned, b.exit-1)
		}
	}
	if len(banned) < s.MinBans {
		return nil
	}
	var members []uint32
	for _, m := range k.ids {
		if !slices.Contains(banned, m) {
			members = append(members, m)
		}
	}
	if len(members) == 0 {
		return nil // every member is banned: each pair's own breaker has it
	}
	slices.Sort(banned)
	g := &groupHold{key: k.key, since: now, banned: banned, members: members}
	w.hold = g
	w.bans = [maxGroupBans]groupBan{}
	m := map[uint32]*groupHold{}
	if cur := h.held.Load(); cur != nil {
		m = maps.Clone(*cur)
	}
	for _, id := range members {
		m[id] = g
	}
	h.storeHeld(m)
	return g
}

// GroupHold is a group held for an origin: in Snapshot.Groups while in force, and in the
// events a GroupObserver hears when it starts and ends. Members appear by label.
type GroupHold struct {
	// Group is the group's key: its group attribute, or an IPv4 /24 ("203.0.113.0/24").
	Group  string    `json:"group"`
	Origin string    `json:"origin"`
	Since  time.Time `json:"since"`
	// Banned are the members whose bans by the origin started the hold; Held the members held to
	// one attempt at a time there.
	Banned []string `json:"banned"`
	Held   []string `json:"held"`
	// Probing reports that a held member's attempt is out (Snapshot only).
	Probing bool `json:"probing,omitempty"`
	// Released is when the hold ended, and ServedBy the member whose served answer ended it ("":
	// the idle sweep forgot the origin, hold and all); zero and "" while it is in force.
	Released time.Time `json:"released,omitzero"`
	ServedBy string    `json:"served_by,omitempty"`
}

// GroupObserver is an Observer that also hears of group holds: GroupChanged is called when a
// hold starts (Released zero) and when it ends, after every lock is released. Like Observer's
// methods it may be called concurrently and must return quickly.
type GroupObserver interface {
	GroupChanged(h GroupHold)
}

// tellGroup tells the GroupObservers of hold g of origin: started, or (released) ended at now by
// a served answer through the exit labelled servedBy ("": forgotten by the idle sweep).
func (p *Pool) tellGroup(set *exitSet, origin string, g *groupHold, now time.Time, released bool, servedBy string) {
	var ev GroupHold
	made := false
	for _, e := range p.obs.load() {
		gob, ok := e.o.(GroupObserver)
		if !ok {
			continue
		}
		if !made {
			ev, made = p.describeHold(set, origin, g, now), true
			if released {
				ev.Released, ev.ServedBy = now, servedBy
			}
		}
		gob.GroupChanged(ev)
	}
}

// describeHold describes hold g of origin at now, its members by label.
func (p *Pool) describeHold(set *exitSet, origin string, g *groupHold, now time.Time) GroupHold {
	labels := func(ids []uint32) []string {
		out := make([]string, 0, len(ids))
		for _, id := range ids {
			if es := set.byID[id]; es != nil {
				out = append(out, es.exit.label)
			}
		}
		return out
	}
	return GroupHold{
		Group: g.key, Origin: origin, Since: g.since, Banned: labels(g.banned), Held: labels(g.members),
		Probing: g.probeOut(now, p.probeLease),
	}
}

// groupHoldsAt lists the holds in force at now, by origin and group.
func (p *Pool) groupHoldsAt(now time.Time) []GroupHold {
	set := p.set.Load()
	var out []GroupHold
	for _, o := range p.originList() {
		o.kin.mu.Lock()
		for _, w := range o.kin.watch {
			if w.hold != nil {
				out = append(out, p.describeHold(set, o.key, w.hold, now))
			}
		}
		o.kin.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b GroupHold) int {
		return cmp.Or(cmp.Compare(a.Origin, b.Origin), cmp.Compare(a.Group, b.Group))
	})
	return out
}

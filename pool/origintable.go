package pool

import (
	"sync"
	"sync/atomic"
)

// originTable holds the pool's origin states by key. Every pick looks its origin up, and a
// read-write lock made each lookup two atomic additions on one shared word: about a tenth of a
// serial pick at 10 exits, and under parallel picks a cache line every core writes. Readers here
// load an immutable map through an atomic pointer and take no lock. Writers — an origin's first
// pick, a sweep dropping idle origins — change the authoritative map under mu and publish a copy
// of it once readers have missed the published one as often as it has keys: each copy is paid
// for by as many slow lookups as it copies (sync.Map's amortisation, without its boxing of keys).
//
// The cost is a second map of the live origins: at 10,000 origins about half a megabyte.
type originTable struct {
	read atomic.Pointer[map[string]*originState] // published: never written once stored
	mu   sync.Mutex
	all  map[string]*originState // every live origin; under mu
	// misses counts lookups that went past read since it was published; stale says all has
	// changed since (a miss on a published table that is current needs no copy).
	misses int
	stale  bool
}

// lookup returns the live state for key, or nil if the table holds none.
func (t *originTable) lookup(key string) *originState { return t.find(key, nil) }

// get returns the live state for key, made by newState and added if the table holds none.
func (t *originTable) get(key string, newState func() *originState) *originState {
	return t.find(key, newState)
}

// find is lookup, and get when newState is not nil.
func (t *originTable) find(key string, newState func() *originState) *originState {
	if o := t.published(key); o != nil {
		return o
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.all[key]
	if o == nil && newState != nil {
		o = newState()
		if t.all == nil {
			t.all = map[string]*originState{}
		}
		t.all[key] = o
		t.stale = true
	}
	t.missed()
	return o
}

// published returns key's state from the published map if it is there and live. A state a sweep
// dropped stays in the published map until the sweep publishes a fresh one: it is dead, and the
// lookup goes on to the authoritative map.
func (t *originTable) published(key string) *originState {
	if m := t.read.Load(); m != nil {
		if o := (*m)[key]; o != nil && !o.isDead() {
			return o
		}
	}
	return nil
}

// missed counts a lookup that read could not answer, publishing a copy of all when readers have
// paid for it. Under mu.
func (t *originTable) missed() {
	t.misses++
	if t.stale && t.misses >= len(t.all) {
		t.publish()
	}
}

// publish stores a copy of all for readers. Under mu.
func (t *originTable) publish() {
	m := make(map[string]*originState, len(t.all))
	for k, o := range t.all {
		m[k] = o
	}
	t.read.Store(&m)
	t.misses, t.stale = 0, false
}

// list returns the live origins.
func (t *originTable) list() []*originState {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*originState, 0, len(t.all))
	for _, o := range t.all {
		out = append(out, o)
	}
	return out
}

// drop removes o if it is still the table's state for its key and kill, which marks it dead if it
// may go, says it did. kill runs under the table's lock, before any lock it takes (o.mu: see the
// lock order in doc.go). The published map lets go of it at the next publishDrops.
func (t *originTable) drop(o *originState, kill func() bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.all[o.key] != o || !kill() {
		return false
	}
	delete(t.all, o.key)
	t.stale = true
	return true
}

// publishDrops publishes the table after a sweep dropped origins, so the published map does not
// keep their states alive.
func (t *originTable) publishDrops() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stale {
		t.publish()
	}
}

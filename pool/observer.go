package pool

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// Observer receives the pool's events: OTel metrics, logs, a status page. Methods may be called
// concurrently from many goroutines and must return quickly: they run on the pick and report paths,
// after every lock is released. Embed NopObserver to implement only some methods and to stay
// source-compatible when methods are added.
type Observer interface {
	// StateChanged is called after any breaker (pair, exit or origin guard) changed state.
	StateChanged(c StateChange)
	// Refused is called when a pick is refused: no healthy exit, the origin is unhealthy, rate
	// limits held it back, or the tiers that could serve it spent their budgets. err is a
	// *NoHealthyExitError, an *OriginUnhealthyError, a *ThrottledError or a *BudgetSpentError
	// (observers that implement BudgetObserver also hear when a budget is first found spent).
	Refused(ctx context.Context, origin string, err error)
	// Throttled is called when rate limits held a pick back: it waited for a token, or was
	// refused for want of one.
	Throttled(ctx context.Context, t Throttle)
	// ExitRemoved is called once for each exit Remove took out of the pool.
	ExitRemoved(e *Exit)
}

// NopObserver implements Observer and does nothing. Embed it in observers that implement only some
// methods.
type NopObserver struct{}

// StateChanged does nothing.
func (NopObserver) StateChanged(StateChange) {}

// Refused does nothing.
func (NopObserver) Refused(context.Context, string, error) {}

// Throttled does nothing.
func (NopObserver) Throttled(context.Context, Throttle) {}

// ExitRemoved does nothing.
func (NopObserver) ExitRemoved(*Exit) {}

// StateChange is one breaker transition, with the key it belongs to.
type StateChange struct {
	Scope  Scope  // ScopePair, ScopeExit or ScopeOrigin
	Exit   *Exit  // nil for ScopeOrigin
	Origin string // empty for ScopeExit
	breaker.Transition
}

// Throttle describes one pick held back by a rate limit.
type Throttle struct {
	Origin string
	// Exit is the exit the pick chose after waiting; nil when it was refused.
	Exit *Exit
	// Scope names the bucket that held the pick back: ScopeExit, ScopePair or ScopeOrigin.
	Scope Scope
	// Waited is how long the pick waited for a token.
	Waited time.Duration
	// Refused reports that the pick gave up: fail-fast, or its deadline came first.
	Refused bool
}

// observers is the pool's list of observers, replaced whole when one is added or removed, so that
// events read it without a lock.
type observers struct {
	mu   sync.Mutex // serialises changes
	next uint64
	list atomic.Pointer[[]observerEntry]
}

// observerEntry keys an observer by the order it came in: observers need not be comparable.
type observerEntry struct {
	id uint64
	o  Observer
}

func (os *observers) load() []observerEntry {
	if l := os.list.Load(); l != nil {
		return *l
	}
	return nil
}

func (os *observers) add(o Observer) (id uint64) {
	os.mu.Lock()
	defer os.mu.Unlock()
	os.next++
	l := append(slices.Clone(os.load()), observerEntry{os.next, o})
	os.list.Store(&l)
	return os.next
}

func (os *observers) remove(id uint64) {
	os.mu.Lock()
	defer os.mu.Unlock()
	l := slices.DeleteFunc(slices.Clone(os.load()), func(e observerEntry) bool { return e.id == id })
	os.list.Store(&l)
}

func (os *observers) stateChanged(c StateChange) {
	for _, e := range os.load() {
		e.o.StateChanged(c)
	}
}

func (os *observers) refused(ctx context.Context, origin string, err error) {
	for _, e := range os.load() {
		e.o.Refused(ctx, origin, err)
	}
}

func (os *observers) throttled(ctx context.Context, t Throttle) {
	for _, e := range os.load() {
		e.o.Throttled(ctx, t)
	}
}

func (os *observers) exitRemoved(x *Exit) {
	for _, e := range os.load() {
		e.o.ExitRemoved(x)
	}
}

// Binder is implemented by observers that read the pool itself — gauges that take a Snapshot on
// each collection, say. Observe binds one before adding it and unbinds it when it is removed.
type Binder interface {
	Bind(p *Pool) (unbind func(), err error)
}

// Observe adds o to the pool's observers, which already include those given to WithObserver, and
// returns a func that removes it again. An o that is a Binder is bound to the pool first; if that
// fails, o is not added and the error says why. Events being delivered while Observe returns may
// miss o.
func (p *Pool) Observe(o Observer) (remove func(), err error) {
	unbind := func() {}
	if b, ok := o.(Binder); ok {
		if unbind, err = b.Bind(p); err != nil {
			return func() {}, err
		}
	}
	id := p.obs.add(o)
	var once sync.Once
	return func() {
		once.Do(func() {
			p.obs.remove(id)
			unbind()
		})
	}, nil
}

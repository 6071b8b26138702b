package sim

import "time"

// exitStrategy is a peer that chooses an exit index and plays the attempt through it (Env.Send).
type exitStrategy struct {
	env    *Env
	choose func(q Request, now time.Time) (e int, done func(ok bool), retryIn time.Duration)
}

// Route implements Router: choose reports the attempt's success (a 200) to the breaker it came
// from once the attempt is over; an attempt the run's end cut short counts as a failure.
func (p *exitStrategy) Route(w int, q Request) error {
	e, done, retryIn := p.choose(q, p.env.Clock.Now())
	if e < 0 {
		return &RefusedError{RetryIn: retryIn}
	}
	r, ok := p.env.Send(w, e, q)
	if done != nil {
		done(ok && r.OK())
	}
	return nil
}

// RoundRobin rotates through every exit, whatever happened before (Colly's RoundRobinProxySwitcher).
func RoundRobin() Strategy {
	return Strategy{Name: "round-robin", New: func(env *Env) (Router, func(), error) {
		next := 0
		return &exitStrategy{env: env, choose: func(Request, time.Time) (int, func(bool), time.Duration) {
			e := next % len(env.Exits)
			next++
			return e, nil, 0
		}}, nil, nil
	}}
}

// Random picks an exit uniformly at random, whatever happened before.
func Random() Strategy {
	return Strategy{Name: "random", New: func(env *Env) (Router, func(), error) {
		return &exitStrategy{env: env, choose: func(Request, time.Time) (int, func(bool), time.Duration) {
			return int(env.Uint64() % uint64(len(env.Exits))), nil, 0
		}}, nil, nil
	}}
}

// PerExitBreaker rotates through the exits, skipping those whose breaker refuses: one breaker per
// exit, with sony/gobreaker's default semantics (see gbBreaker).
func PerExitBreaker() Strategy { return breakerStrategy("per-exit breaker", false) }

// PerPairBreaker is PerExitBreaker with one breaker per (exit, origin) pair.
func PerPairBreaker() Strategy { return breakerStrategy("per-(exit, origin) breaker", true) }

func breakerStrategy(name string, perPair bool) Strategy {
	return Strategy{Name: name, New: func(env *Env) (Router, func(), error) {
		n, origins := len(env.Exits), len(env.Scenario.Origins)
		bs := make([]gbBreaker, n*map[bool]int{false: 1, true: origins}[perPair])
		next := 0
		return &exitStrategy{env: env, choose: func(q Request, now time.Time) (int, func(bool), time.Duration) {
			o := q.Origin
			soonest := time.Duration(-1)
			for i := range n {
				e := (next + i) % n
				k := e
				if perPair {
					k = e*origins + o
				}
				b := &bs[k]
				gen, ok, in := b.allow(now)
				if !ok {
					if soonest < 0 || in < soonest {
						soonest = in
					}
					continue
				}
				next = e + 1
				return e, func(success bool) { b.report(env.Clock.Now(), gen, success) }, 0
			}
			return -1, nil, soonest
		}}, nil, nil
	}}
}

// Oracle knows the ground truth, every kind of episode included: it sends a request only through
// an exit that will be served (the page, or the 403 an origin gives everyone for a path it
// forbids), chosen at random among them, and otherwise waits a quarter second. It never wastes an
// attempt, so its goodput is what the exits could carry.
func Oracle() Strategy {
	return Strategy{Name: "oracle", New: func(env *Env) (Router, func(), error) {
		good := make([]int, 0, len(env.Exits))
		return &exitStrategy{env: env, choose: func(q Request, now time.Time) (int, func(bool), time.Duration) {
			good = good[:0]
			for e := range env.Exits {
				if env.Truth.Peek(e, q, now).Served() {
					good = append(good, e)
				}
			}
			if len(good) == 0 {
				return -1, nil, 250 * time.Millisecond
			}
			return good[env.Uint64()%uint64(len(good))], nil, 0
		}}, nil, nil
	}}
}

// Strategies returns every strategy of the comparison, ours first and the oracle last. The paced
// variant keeps the round-1 world's cap, 12 a minute, in every world: a pace set by hand.
func Strategies() []Strategy {
	return []Strategy{Ours(), OursResetOnClose(), OursPaced(12), RoundRobin(), Random(), PerExitBreaker(), PerPairBreaker(), Oracle()}
}

package sim

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/ratelimit"
	"github.com/proxybreaker/proxybreaker/transport"
	"golang.org/x/time/rate"
)

// Ours is proxybreaker's Transport with its default settings. Only the random sources are
// replaced (by seeded ones, for determinism), and the clock and base by the simulation's.
func Ours() Strategy { return OursWith("ours (defaults)", nil) }

// OursWith is proxybreaker's Transport with the pair breakers' settings changed by tune (when not
// nil) and extra options, under its own name.
func OursWith(name string, tune func(*breaker.Settings), opts ...transport.Option) Strategy {
	return Strategy{Name: name, New: func(env *Env) (http.RoundTripper, func(), error) {
		pair := breaker.Settings{Rand: env.Float64}
		if tune != nil {
			tune(&pair)
		}
		exit := transport.DefaultExitSettings()
		exit.Rand = env.Float64
		all := append([]transport.Option{
			transport.WithExits(env.Exits...), transport.WithClock(env.Clock), transport.WithBase(env.Base),
			transport.WithRand(env.Uint64), transport.WithBreakerSettings(pair), transport.WithExitBreakerSettings(exit),
			// No background sweep within the simulated hours: it runs on a goroutine of its own, whose
			// timing against the event loop would make two runs differ. It only forgets idle state
			// (memory, measured in the churn run), and the 10-minute default TTL barely matters here.
			transport.WithIdleTTL(24 * time.Hour),
		}, opts...)
		t, err := transport.New(all...)
		if err != nil {
			return nil, nil, err
		}
		return t, func() { t.Close() }, nil
	}}
}

// OursPaced is ours with a per-pair rate limit at the origins' cap, failing fast when a pair has
// no token (a worker then waits for the soonest token).
func OursPaced(perMinute int) Strategy {
	return OursWith("ours (tuned: PerPair "+strconv.Itoa(perMinute)+"/min)", nil, transport.WithRateLimits(ratelimit.Limits{
		PerPair: ratelimit.Limit{Rate: ratelimitRate(perMinute), Burst: 1}, FailFast: true,
	}))
}

// OursResetOnClose is ours with the classic reset-on-close backoff (StablePeriod -1) instead of the
// anti-flapping decay: pairs re-probed after a ban come back sooner, flaky exits are retried more.
func OursResetOnClose() Strategy {
	return OursWith("ours (tuned: StablePeriod -1)", func(s *breaker.Settings) { s.StablePeriod = -1 })
}

// exitStrategy is a peer that chooses an exit index and sends through the simulated base.
type exitStrategy struct {
	env    *Env
	choose func(o int, now time.Time) (e int, done func(ok bool), retryIn time.Duration)
}

func (p *exitStrategy) RoundTrip(req *http.Request) (*http.Response, error) {
	o := originOf(req)
	e, done, retryIn := p.choose(o, p.env.Clock.Now())
	if e < 0 {
		return nil, &RefusedError{RetryIn: retryIn}
	}
	resp, err := p.env.Base.RoundTrip(req.WithContext(WithExit(req.Context(), e)))
	if done != nil {
		done(err == nil && resp.StatusCode < 400)
	}
	return resp, err
}

func originOf(req *http.Request) int {
	o, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(req.URL.Host, "o"), ".test"))
	return o
}

// RoundRobin rotates through every exit, whatever happened before (Colly's RoundRobinProxySwitcher).
func RoundRobin() Strategy {
	return Strategy{Name: "round-robin", New: func(env *Env) (http.RoundTripper, func(), error) {
		next := 0
		return &exitStrategy{env: env, choose: func(int, time.Time) (int, func(bool), time.Duration) {
			e := next % len(env.Exits)
			next++
			return e, nil, 0
		}}, nil, nil
	}}
}

// Random picks an exit uniformly at random, whatever happened before.
func Random() Strategy {
	return Strategy{Name: "random", New: func(env *Env) (http.RoundTripper, func(), error) {
		return &exitStrategy{env: env, choose: func(int, time.Time) (int, func(bool), time.Duration) {
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
	return Strategy{Name: name, New: func(env *Env) (http.RoundTripper, func(), error) {
		n, origins := len(env.Exits), env.Scenario.Origins
		bs := make([]gbBreaker, n*map[bool]int{false: 1, true: origins}[perPair])
		next := 0
		return &exitStrategy{env: env, choose: func(o int, now time.Time) (int, func(bool), time.Duration) {
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

// Oracle knows the ground truth: it sends a request only through an exit that will succeed,
// chosen at random among them, and otherwise waits a quarter second.
func Oracle() Strategy {
	return Strategy{Name: "oracle", New: func(env *Env) (http.RoundTripper, func(), error) {
		good := make([]int, 0, len(env.Exits))
		return &exitStrategy{env: env, choose: func(o int, now time.Time) (int, func(bool), time.Duration) {
			good = good[:0]
			for e := range env.Exits {
				if env.Truth.Peek(e, o, now).OK() {
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

// Strategies returns every strategy of the default comparison, ours first and the oracle last.
func Strategies(sc Scenario) []Strategy {
	return []Strategy{Ours(), OursResetOnClose(), OursPaced(sc.RatePerMinute), RoundRobin(), Random(), PerExitBreaker(), PerPairBreaker(), Oracle()}
}

func ratelimitRate(perMinute int) rate.Limit { return rate.Limit(float64(perMinute) / 60) }

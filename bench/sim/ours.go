package sim

import (
	"context"
	"strconv"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/ratelimit"
	"golang.org/x/time/rate"
)

// Ours is proxybreaker's pool with its default settings, driven through its public API: each
// request is a PickAt on the simulation's clock, the ground truth plays the attempt through the
// exit picked, and the lease gets the verdict the transport's DefaultClassifier would give the
// outcome (see Verdict). The pool is seeded (pool.WithSeed) from the strategy's random source and
// sweeps inline (pool.WithInlineSweep), so that a run is deterministic for its seed.
func Ours() Strategy { return OursWith("ours (defaults)", nil) }

// OursWith is Ours with the pair breakers' settings changed by tune (when not nil) and extra
// options, under its own name.
func OursWith(name string, tune func(*breaker.Settings), opts ...pool.Option) Strategy {
	return Strategy{Name: name, New: func(env *Env) (Router, func(), error) {
		exits, err := subnetExits(env)
		if err != nil {
			return nil, nil, err
		}
		var pair breaker.Settings
		if tune != nil {
			tune(&pair)
		}
		all := append([]pool.Option{
			pool.WithExits(exits...), pool.WithClock(env.Clock), pool.WithPairSettings(pair),
			pool.WithSeed(env.Uint64()), pool.WithInlineSweep(),
		}, opts...)
		p, err := pool.New(all...)
		if err != nil {
			return nil, nil, err
		}
		r := &poolRouter{env: env, p: p, exit: make(map[string]int, len(env.Exits)), origins: make([]string, len(env.Scenario.Origins))}
		for e, x := range env.Exits {
			r.exit[x.Label()] = e
		}
		for o := range r.origins {
			r.origins[o] = OriginKey(o)
		}
		return r, p.Close, nil
	}}
}

// OursPaced is ours with a per-pair rate limit at the origins' cap, failing fast when a pair has
// no token (a worker then waits for the soonest token).
func OursPaced(perMinute int) Strategy {
	return OursWith("ours (tuned: PerPair "+strconv.Itoa(perMinute)+"/min)", nil, pool.WithRateLimits(ratelimit.Limits{
		PerPair: ratelimit.Limit{Rate: ratelimitRate(perMinute), Burst: 1}, FailFast: true,
	}))
}

// OursResetOnClose is ours with the classic reset-on-close backoff (StablePeriod -1) instead of the
// anti-flapping decay: pairs re-probed after a ban come back sooner, flaky exits are retried more.
func OursResetOnClose() Strategy {
	return OursWith("ours (tuned: StablePeriod -1)", func(s *breaker.Settings) { s.StablePeriod = -1 })
}

// poolRouter routes each request through a lease of its pool.
type poolRouter struct {
	env     *Env
	p       *pool.Pool
	exit    map[string]int // exit index by label
	origins []string       // origin key by index
	pages   uint64         // ordinary pages asked for so far (path)
}

// path is the path q asks for, as the lease is told it: the origin's forbidden path (every such
// request asks for the same one), else a page of its own — a crawl asks for each URL once, so a
// 403 for an ordinary page is never for a path the site served others moments before, and the
// served-path evidence (pool.SuspectEvidence) is not credited with what a crawl would not give it.
// Workers run one at a time (sched), so the count needs no lock.
func (r *poolRouter) path(q Request) string {
	if q.Forbidden {
		return q.Path()
	}
	r.pages++
	return "/p/" + strconv.FormatUint(r.pages, 10)
}

// Route picks an exit at the clock's now, plays the attempt, and reports its verdict when the
// attempt is over, as a Transport does when the response (or the error) arrives. A refused pick is
// the pool's error, for the worker to wait on. The pool never waits for a token here: the request
// says FailFast — the crawler moves on to its next URL, as a worker does after any refusal — so a
// pick never sleeps on the simulation's clock (learned paces are on by default).
func (r *poolRouter) Route(w int, q Request) error {
	lease, err := r.p.PickAt(context.Background(), r.env.Clock.Now(), pool.Request{Origin: r.origins[q.Origin], FailFast: true})
	if err != nil {
		return err
	}
	lease.SetPath(r.path(q)) // as package transport does for every attempt (the plain-403 judgement's evidence)
	res, ok := r.env.Send(w, r.exit[lease.Exit().Label()], q)
	if !ok {
		lease.Release() // the run ended during the attempt: it has no outcome
		return nil
	}
	now := r.env.Clock.Now()
	lease.ReportAt(now, judgePage(&lease, res, now, Verdict(res, now))) // a 200 page: as a Transport judges it (softblock.go)
	return nil
}

func ratelimitRate(perMinute int) rate.Limit { return rate.Limit(float64(perMinute) / 60) }

package sim

import (
	"math/rand/v2"
	"strconv"
	"time"
)

// Request is one request of the workload: the origin it is for, and whether it asks for the
// path that origin forbids to everyone (Origin.ForbiddenShare).
type Request struct {
	Origin    int
	Forbidden bool
}

// Path is the request's path on its origin.
func (q Request) Path() string {
	if q.Forbidden {
		return "/private/"
	}
	return "/"
}

// Burst is a stretch of the workload during which Scenario.BurstShare of the requests are for
// one origin (a crawl that found a large section of one site).
type Burst struct {
	Window
	Origin int
}

// Bursts returns the workload's bursts, sorted.
func (g *Truth) Bursts() []Burst { return g.bursts }

// Draw returns a worker's next request at now, drawn from r (the worker's own stream): its
// origin uniformly, or during a burst the burst's origin with probability BurstShare; then, for
// an origin with a forbidden path, that path with probability ForbiddenShare. A world without
// bursts or forbidden paths draws exactly one number a request, as the round-1 world did.
func (g *Truth) Draw(r *rand.Rand, now time.Time) Request {
	q := Request{Origin: -1}
	if b, ok := g.burstAt(now); ok && r.Float64() < g.sc.BurstShare {
		q.Origin = b.Origin
	}
	if q.Origin < 0 {
		q.Origin = r.IntN(g.no)
	}
	if f := g.sc.Origins[q.Origin].ForbiddenShare; f > 0 && r.Float64() < f {
		q.Forbidden = true
	}
	return q
}

func (g *Truth) burstAt(now time.Time) (Burst, bool) {
	for _, b := range g.bursts {
		if b.Contains(now) {
			return b, true
		}
		if b.From.After(now) {
			break
		}
	}
	return Burst{}, false
}

// OriginKey is the key ours gives origin o's requests (pool.Request.Origin): the host name
// transport.OriginHost would give its URL.
func OriginKey(o int) string { return "o" + strconv.Itoa(o) + ".test" }

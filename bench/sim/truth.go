// Package sim plays a pool of proxy exits against a seeded ground truth on a virtual clock, and
// compares routing strategies by what they get done.
//
//	worker → Router.Route → picks an exit → Env.Send → Truth decides status/error and latency
//	       → the worker is busy for that simulated latency → (ours: Lease.ReportAt(Verdict)) → next event
//
// Ours drives a pool.Pool through its public API, with no HTTP in between: Pool.PickAt on the
// simulation's clock, then Lease.ReportAt with the verdict transport.DefaultClassifier would give
// the outcome (Verdict). The peers choose exits by their own rules.
//
// No sleeps: a discrete-event loop advances a clock.Fake to the earliest worker event and lets
// exactly one worker goroutine run at a time, so a run is deterministic for its seed.
package sim

import (
	"math/rand/v2"
	"time"
)

// Kind is what an exit is, in the ground truth.
type Kind uint8

// The kinds of exits.
const (
	Healthy  Kind = iota // rate-capped per origin, sometimes banned per origin for a while
	Dead                 // its gateway refuses connections: every attempt is refused at once
	AuthFail             // it answers every request 407
	Flaky                // like Healthy, but each attempt times out with probability FlakyTimeout
)

var kindNames = [...]string{"healthy", "dead", "auth", "flaky"}

func (k Kind) String() string { return kindNames[k] }

// Scenario is the ground truth's shape. Durations are simulated time.
type Scenario struct {
	Seed     uint64
	Duration time.Duration // simulated time of a run
	Workers  int           // concurrent requests
	Exits    int
	Origins  int
	Dead     int // exits of each kind; the rest are Healthy
	Auth     int
	Flaky    int
	// FlakyTimeout is the probability that an attempt through a Flaky exit times out (any origin).
	FlakyTimeout float64
	// RatePerMinute caps each (exit, origin) pair: requests beyond it in a clock minute get 429
	// with Retry-After until the minute ends.
	RatePerMinute int
	// BansPerHour is the mean number of ban episodes a Healthy or Flaky pair suffers an hour; an
	// episode lasts BanMin..BanMax, during which the origin answers a challenge page (403).
	BansPerHour    float64
	BanMin, BanMax time.Duration
	// Timeout is what a timed-out attempt costs its worker (the client's header timeout).
	Timeout time.Duration
	// LatencyMin..LatencyMax is the latency of an attempt that reached the origin.
	LatencyMin, LatencyMax time.Duration
	// MaxRefusalWait caps how long a worker waits after its strategy refused to send (no exit
	// ready) before it takes its next request, whatever RetryIn said: a refusal costs no network
	// time, and a crawler with a queue of URLs over many origins moves on. At least 100 ms.
	MaxRefusalWait time.Duration
}

// DefaultScenario is the scenario RESULTS.md reports: 3 simulated hours, 48 workers, 40 exits
// (4 dead, 2 failing auth, 8 flaky), 8 origins each capping an exit at 12 requests a minute.
func DefaultScenario() Scenario {
	return Scenario{
		Seed: 1, Duration: 3 * time.Hour, Workers: 48, Exits: 40, Origins: 8,
		Dead: 4, Auth: 2, Flaky: 8, FlakyTimeout: 0.3, RatePerMinute: 12,
		BansPerHour: 0.5, BanMin: 10 * time.Minute, BanMax: 40 * time.Minute,
		Timeout: 15 * time.Second, LatencyMin: 200 * time.Millisecond, LatencyMax: time.Second,
		MaxRefusalWait: time.Second,
	}
}

// Epoch is the simulated instant a run starts at.
var Epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// Window is a half-open interval [From, To) of simulated time.
type Window struct{ From, To time.Time }

// Result is the ground truth's answer to one attempt.
type Result struct {
	Status     int           // 200, 403 (challenge), 407, 429; 0 when Err is set
	Err        ErrKind       // ErrNone, ErrTimeout, ErrRefused
	Latency    time.Duration // how long the worker is busy with the attempt
	RetryAfter time.Duration // with a 429
}

// OK reports whether the attempt succeeded.
func (r Result) OK() bool { return r.Err == ErrNone && r.Status == 200 }

// ErrKind is a failure without a response.
type ErrKind uint8

// The failures without a response.
const (
	ErrNone ErrKind = iota
	ErrTimeout
	ErrRefused
)

// Truth is the seeded ground truth: which exits are what, when pairs are banned, and how many
// requests each pair has taken in the current minute. It is not safe for concurrent use; the
// simulation runs one worker at a time.
type Truth struct {
	sc     Scenario
	kinds  []Kind
	bans   [][]Window // by pair index e*Origins+o, sorted
	minute []int64    // by pair: the minute the count belongs to
	count  []int      // by pair: requests that reached the origin in that minute
}

// NewTruth draws the ground truth of sc from sc.Seed.
func NewTruth(sc Scenario) *Truth {
	r := rand.New(rand.NewPCG(sc.Seed, 0x7275746800000000))
	g := &Truth{sc: sc, kinds: make([]Kind, sc.Exits)}
	// Kinds are dealt to a shuffled order so that exit indices say nothing.
	order := r.Perm(sc.Exits)
	for i, e := range order {
		switch {
		case i < sc.Dead:
			g.kinds[e] = Dead
		case i < sc.Dead+sc.Auth:
			g.kinds[e] = AuthFail
		case i < sc.Dead+sc.Auth+sc.Flaky:
			g.kinds[e] = Flaky
		}
	}
	n := sc.Exits * sc.Origins
	g.bans = make([][]Window, n)
	g.minute = make([]int64, n)
	g.count = make([]int, n)
	hours := sc.Duration.Hours()
	for p := range n {
		if k := g.kinds[p/sc.Origins]; k == Dead || k == AuthFail || sc.BansPerHour <= 0 {
			continue
		}
		// Poisson arrivals of episodes; an episode starting inside another extends nothing.
		at := time.Duration(0)
		for {
			at += time.Duration(r.ExpFloat64() / sc.BansPerHour * float64(time.Hour))
			if at >= sc.Duration || hours == 0 {
				break
			}
			d := sc.BanMin + time.Duration(r.Int64N(int64(sc.BanMax-sc.BanMin)+1))
			w := Window{Epoch.Add(at), Epoch.Add(at + d)}
			g.bans[p] = append(g.bans[p], w)
			at += d
		}
	}
	return g
}

// Kind returns exit e's kind.
func (g *Truth) Kind(e int) Kind { return g.kinds[e] }

// Bans returns the ban episodes of pair (e, o), sorted.
func (g *Truth) Bans(e, o int) []Window { return g.bans[e*g.sc.Origins+o] }

// Banned reports whether pair (e, o) is banned at now.
func (g *Truth) Banned(e, o int, now time.Time) bool {
	for _, w := range g.Bans(e, o) {
		if !now.Before(w.From) && now.Before(w.To) {
			return true
		}
	}
	return false
}

// Peek returns what an attempt through exit e to origin o at now would get, without counting it.
// Send at the same instant gets the same answer.
func (g *Truth) Peek(e, o int, now time.Time) Result { return g.answer(e, o, now, false) }

// Send plays an attempt through exit e to origin o at now, counting it against the pair's rate.
func (g *Truth) Send(e, o int, now time.Time) Result { return g.answer(e, o, now, true) }

func (g *Truth) answer(e, o int, now time.Time, count bool) Result {
	h := mix(g.sc.Seed ^ mix(uint64(e)<<32|uint64(o)) ^ mix(uint64(now.UnixNano())))
	span := int64(g.sc.LatencyMax - g.sc.LatencyMin)
	lat := g.sc.LatencyMin
	if span > 0 {
		lat += time.Duration(h % uint64(span+1))
	}
	switch g.kinds[e] {
	case Dead:
		return Result{Err: ErrRefused, Latency: 2 * time.Millisecond}
	case AuthFail:
		return Result{Status: 407, Latency: 50 * time.Millisecond}
	case Flaky:
		if float64(mix(h)>>11)/(1<<53) < g.sc.FlakyTimeout {
			return Result{Err: ErrTimeout, Latency: g.sc.Timeout}
		}
	}
	if g.Banned(e, o, now) {
		return Result{Status: 403, Latency: lat}
	}
	p := e*g.sc.Origins + o
	m := now.Sub(Epoch).Milliseconds() / 60000
	c := g.count[p]
	if g.minute[p] != m {
		c = 0
	}
	if count {
		g.minute[p], g.count[p] = m, c+1
	}
	if c >= g.sc.RatePerMinute {
		end := Epoch.Add(time.Duration(m+1) * time.Minute)
		ra := (end.Sub(now) + time.Second - 1).Truncate(time.Second) // whole seconds, rounded up
		return Result{Status: 429, Latency: lat / 4, RetryAfter: ra}
	}
	return Result{Status: 200, Latency: lat}
}

// mix is splitmix64's finaliser: a fixed, well-spread hash of x.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

package pool

import (
	"math"
	"time"
)

// Capacity is an operator's answer for one origin at an instant: how many exits can serve it
// now, at what rate they can sustain, and how many a given rate needs. See Pool.Capacity.
type Capacity struct {
	Origin string    `json:"origin"`
	At     time.Time `json:"at"`
	Exits  int       `json:"exits"`  // exits in the pool
	Usable int       `json:"usable"` // exits whose own and pair breakers would admit a request now
	// Slow is how many usable exits the origin tracks as slow (latency-aware selection sends them
	// a trickle); Latency is its typical latency, 0 before any answer.
	Slow    int           `json:"slow"`
	Latency time.Duration `json:"latency"`
	// PerExit is the sustainable rate of one exit for the origin, requests a second: the window
	// its pairs learned from its 429s (N per Length); 0 when none was learned — the origin has
	// shown no cap, so the rate is unknown, not unlimited. Rate is Usable × PerExit.
	PerExit float64 `json:"per_exit_rate"`
	Rate    float64 `json:"rate"`
	// PerExitMin is the least the per-exit rate may be, requests a second: PerExit when the
	// learned window is sure, lower when its length is a guess of the origin's period (the
	// shortest it may be, from how fast a pair was served before a block: ratelimit.Window.Upper)
	// — the window is then N per a length between PerExit's and PerExitMin's, and Guess says so.
	PerExitMin float64 `json:"per_exit_rate_min"`
	Guess      bool    `json:"guess,omitempty"`
	// NextSlot is when the origin has room next through any exit (Pool.NextSlotAt): At when an
	// exit may take a request now, zero when none ever may by what the pool knows.
	NextSlot time.Time `json:"next_slot"`
}

// ExitsFor returns how many exits the origin needs to sustain rate requests a second at its
// learned per-exit rate, or 0 when no per-exit rate was learned.
func (c Capacity) ExitsFor(rate float64) int {
	if c.PerExit <= 0 || rate <= 0 {
		return 0
	}
	return int(math.Ceil(rate / c.PerExit))
}

// Capacity is shorthand for CapacityAt(now, origin) with now read from the pool's clock.
func (p *Pool) Capacity(origin string) Capacity { return p.CapacityAt(p.clock.Now(), origin) }

// CapacityAt reports the origin's capacity at now. It looks at every exit's breakers (as a pick
// would, taking nothing): it is for operators and reports, not for each request.
func (p *Pool) CapacityAt(now time.Time, origin string) Capacity {
	o := p.liveOrigin(origin)
	set := p.set.Load()
	c := Capacity{Origin: origin, At: now, Exits: len(set.all)}
	for gi := range set.groups {
		g := &set.groups[gi]
		for i := range g.exits {
			if ok, _ := p.breakersReady(now, o, g, i, nil); !ok || p.gone.get(g.id(i)) {
				continue
			}
			c.Usable++
			if typ := o.lat.typicalSeconds(); o.lat.estimate(now, g.id(i), typ) > typ {
				c.Slow++
			}
		}
	}
	c.Latency = time.Duration(o.lat.typicalSeconds() * float64(time.Second))
	if w := o.pace.prior(); !w.IsZero() && w.Length > 0 {
		c.PerExit = float64(w.N) / w.Length.Seconds()
		c.Rate = c.PerExit * float64(c.Usable)
		c.PerExitMin, c.Guess = c.PerExit, w.Guess()
		if c.Guess {
			c.PerExitMin = float64(w.N) / w.Upper.Seconds()
		}
	}
	c.NextSlot = p.NextSlotAt(now, origin)
	return c
}

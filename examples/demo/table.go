package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// Display pacing: state-change lines are printed within flushEvery of happening; the table is
// reprinted when a breaker's state has changed, at most once per tableEvery.
const (
	flushEvery = 100 * time.Millisecond
	tableEvery = 500 * time.Millisecond
	quietEvery = 5 * time.Second // a progress line when nothing else was printed for this long
)

// display prints, while the load runs, a line per breaker state change and the breaker table
// whenever some breaker's state differs from the last table printed. It is the only writer to
// out until it stops.
type display struct {
	out   io.Writer
	w     *scene
	pool  *pool.Pool // the breakers the table shows
	rec   *recorder
	st    *loadStats
	total int
	start time.Time
	color bool

	lastKey   string
	lastTable time.Time
	lastPrint time.Time
	blank     bool // the last line printed was blank
	stop      chan struct{}
	done      chan struct{}
}

func startDisplay(out io.Writer, w *scene, p *pool.Pool, rec *recorder, st *loadStats, total int, start time.Time, color bool) *display {
	d := &display{
		out: out, w: w, pool: p, rec: rec, st: st, total: total, start: start, color: color,
		stop: make(chan struct{}), done: make(chan struct{}), lastPrint: start,
		blank: true, // the introduction ends with a blank line
	}
	go d.loop()
	return d
}

func (d *display) loop() {
	defer close(d.done)
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	for {
		select {
		case <-d.stop:
			d.flush(true)
			return
		case <-tick.C:
			d.flush(false)
		}
	}
}

// close prints what is pending and the final table, and stops the display.
func (d *display) close() {
	close(d.stop)
	<-d.done
}

func (d *display) flush(final bool) {
	now := time.Now()
	lines := d.rec.takeLines()
	for _, l := range lines {
		fmt.Fprintln(d.out, l)
		d.lastPrint = now
	}
	d.blank = d.blank && len(lines) == 0
	if !final && now.Sub(d.lastTable) < tableEvery {
		return
	}
	text, key := d.render(d.pool.Snapshot())
	switch {
	case key != d.lastKey || final:
		d.lastKey, d.lastTable, d.lastPrint = key, now, now
		if d.blank {
			text = text[1:] // the last table's trailing blank line will do
		}
		io.WriteString(d.out, text)
		d.blank = true
	case now.Sub(d.lastPrint) >= quietEvery:
		d.lastPrint = now
		fmt.Fprintln(d.out, d.progress(now))
		d.blank = false
	}
}

// progress is the table's first line: how far the load has got.
func (d *display) progress(at time.Time) string {
	return fmt.Sprintf("%6.1fs  sent %d/%d · %d ok · %d failed · %d refused", at.Sub(d.start).Seconds(),
		d.st.sent.Load(), d.total, d.st.ok.Load(), d.st.failed.Load(), d.st.refused.Load())
}

// Column widths of the table.
const (
	exitCol  = 11
	stateCol = 13
)

// render draws the table for s. key captures only the breakers' states, not countdowns or counts,
// so that the table is reprinted when something changed state.
func (d *display) render(s pool.Snapshot) (text, key string) {
	exits := map[string]pool.ExitStatus{}
	for _, e := range s.Exits {
		exits[e.Exit] = e
	}
	pairs := map[pairKey]breaker.Snapshot{}
	for _, p := range s.Pairs {
		pairs[pairKey{p.Exit, d.w.SiteName(p.Origin)}] = p.Breaker
	}
	counts := d.rec.counts()
	var b, k strings.Builder
	fmt.Fprintf(&b, "\n%s\n", d.progress(s.At))
	fmt.Fprintf(&b, "        %-*s tier ", exitCol, "exit")
	for _, o := range d.w.origins {
		fmt.Fprintf(&b, " %-*s", stateCol, o.Name)
	}
	fmt.Fprintf(&b, " %-*s trips    ok failed\n", stateCol, "exit breaker")
	for _, e := range d.w.Exits {
		label := e.Label()
		es := exits[label]
		trips := es.Breaker.Trips
		fmt.Fprintf(&b, "        %-*s %4d ", exitCol, label, e.Tier())
		for _, o := range d.w.origins {
			p, ok := pairs[pairKey{label, o.Name}]
			c, ck := "·", "closed" // the pool holds no breaker for a pair that is CLOSED and fresh
			if ok {
				c, ck = cell(p, s.At)
				trips += p.Trips
			}
			fmt.Fprintf(&b, " %s", paint(d.color, fmt.Sprintf("%-*s", stateCol, c), ck))
			k.WriteString(ck + ",")
		}
		c, ck := cell(es.Breaker, s.At)
		k.WriteString(ck + ";")
		n := counts[label]
		fmt.Fprintf(&b, " %s %5d %5d %6d\n", paint(d.color, fmt.Sprintf("%-*s", stateCol, c), ck), trips, n[0], n[1])
	}
	for _, o := range s.Origins {
		if o.Breaker.State == breaker.Closed {
			continue
		}
		c, ck := cell(o.Breaker, s.At)
		fmt.Fprintf(&b, "        origin guard %s: %s (most exits fail it: its requests are refused)\n", d.w.SiteName(o.Origin), paint(d.color, c, ck))
		k.WriteString(o.Origin + ck)
	}
	b.WriteString("\n")
	return b.String(), k.String()
}

// cell shows one breaker: "closed", "OPEN 2.4s" or "PARKED 14.0s" with the time to its next
// probe, "probe due" once that window is over, and "half-open" only while a probe is out. key is
// the state alone.
//
// The pool computes OPEN → HALF_OPEN lazily: a snapshot taken after the window shows a breaker
// HALF_OPEN before any request probes it, and the transition's line ("a probe goes through") is
// printed only when a pick takes the probe slot. Until then, and for good where nothing ever
// picks the pair, the table says "probe due" rather than suggest a probe in flight.
func cell(b breaker.Snapshot, now time.Time) (text, key string) {
	name := stateName(b.State, b.Parked)
	switch {
	case b.State == breaker.HalfOpen && b.ProbesInFlight == 0:
		return probeDue, probeDue
	case b.State != breaker.Open:
		return name, name
	}
	return fmt.Sprintf("%s %.1fs", name, max(b.NextProbe.Sub(now), 0).Seconds()), name
}

// probeDue is the table's name for a HALF_OPEN breaker with no probe out: the next request picked
// for it goes as the probe.
const probeDue = "probe due"

// stateName names a state for people: OPEN and PARKED in capitals, because they are the news.
func stateName(s breaker.State, parked bool) string {
	switch s {
	case breaker.Closed:
		return "closed"
	case breaker.HalfOpen:
		return "half-open"
	case breaker.Open:
		if parked {
			return "PARKED"
		}
		return "OPEN"
	}
	return s.String()
}

// paint colours text by state name when color is on: red for OPEN and PARKED, yellow for
// half-open and probe due, green for closed.
func paint(color bool, text, state string) string {
	if !color {
		return text
	}
	code := ""
	switch state {
	case "OPEN", "PARKED":
		code = "31"
	case "half-open", probeDue:
		code = "33"
	case "closed":
		code = "32"
	default:
		return text
	}
	return "\x1b[" + code + "m" + text + "\x1b[0m"
}

// describeChange is the line printed for one transition, e.g.
// "12.3s  res-capped → shop: closed → OPEN (retry_after, rate_limited) next probe in 3.5s".
// fromParked says that the breaker was parked before this transition.
func describeChange(c pool.StateChange, at time.Duration, name func(string) string, fromParked, color bool) string {
	var who string
	switch c.Scope {
	case pool.ScopePair:
		who = c.Exit.Label() + " → " + name(c.Origin)
	case pool.ScopeExit:
		who = c.Exit.Label() + " (whole exit)"
	default:
		who = "origin guard " + name(c.Origin)
	}
	why := string(c.Cause)
	if c.Reason != "" && c.To == breaker.Open {
		why += ", " + c.Reason
	}
	var then string
	switch {
	case c.To == breaker.Open:
		then = fmt.Sprintf("next probe in %.1fs", c.NextProbe.Sub(c.At).Seconds())
		if c.Level > 1 && !c.Parked {
			then += fmt.Sprintf(" (backoff level %d)", c.Level)
		}
	case c.To == breaker.HalfOpen:
		then = "a probe goes through"
	case c.From == breaker.HalfOpen && c.To == breaker.Closed:
		then = "reheated: traffic flows again"
	}
	to := stateName(c.To, c.Parked)
	return fmt.Sprintf("%6.1fs  %-23s %s → %s (%s) %s",
		at.Seconds(), who+":", stateName(c.From, fromParked), paint(color, to, to), why, then)
}

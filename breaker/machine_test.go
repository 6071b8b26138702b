package breaker

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Every table counts instants in units from t0: at(3) is t3.
var t0 = time.Date(2025, time.March, 1, 12, 0, 0, 0, time.UTC)

const unit = time.Second

func at(n int) time.Time { return t0.Add(time.Duration(n) * unit) }

// tname writes an instant the way the tables do: t23, or t0+22.5s when it is not a whole unit.
func tname(tm time.Time) string {
	if tm.IsZero() {
		return "zero"
	}
	d := tm.Sub(t0)
	if d%unit == 0 {
		return fmt.Sprintf("t%d", d/unit)
	}
	return fmt.Sprintf("t0+%v", d)
}

// fixed disables jitter unless the case sets it, so every OPEN window is exact.
func fixed(s Settings) Settings {
	if s.Jitter == 0 {
		s.Jitter = -1
	}
	return s
}

func mustPolicy(tb testing.TB, s Settings) *Policy {
	tb.Helper()
	p, err := NewPolicy(s)
	if err != nil {
		tb.Fatalf("NewPolicy(%+v) = %v", s, err)
	}
	return p
}

// describe writes a transition compactly: "closed→open failures t3 next t23 L1".
func describe(tr Transition) string {
	s := fmt.Sprintf("%v→%v %s %s", tr.From, tr.To, tr.Cause, tname(tr.At))
	if tr.To == Open {
		s += " next " + tname(tr.NextProbe)
	}
	s += fmt.Sprintf(" L%d", tr.Level)
	if tr.Parked {
		s += " parked"
	}
	return s
}

type action uint8

const (
	look    action = iota // nothing; only the snapshot checks run
	acquire               // AcquireLease(at, lease) into permits[p]; want ok (and probe)
	success               // permits[p].Success(at); with p == "", Acquire at the same instant first
	failure               // permits[p].Failure(at, f); likewise
	neutral               // permits[p].Neutral(at); likewise
	release               // permits[p].Release(at); likewise
	ready                 // Ready(at); want ok, and retryAt == t(retry) when not ok
)

var actionNames = [...]string{"Look", "Acquire", "Success", "Failure", "Neutral", "Release", "Ready"}

func (a action) String() string { return actionNames[a] }

// step is one row of a state-machine table: an action at t(at), then what Snapshot(t(at)) must show.
type step struct {
	at    int
	do    action
	p     string        // permit name; see the actions
	f     Failure       // for failure
	lease time.Duration // for acquire: AcquireLease's lease (0: the policy's)
	ok    bool          // acquire, ready: the wanted answer
	probe bool          // acquire: want Probe()
	retry int           // ready: want retryAt == t(retry) when !ok

	// Snapshot(t(at)) after the step.
	state    State
	next     int  // NextProbe == t(next) when state is Open, else zero
	level    int  // Level
	inflight int  // ProbesInFlight
	fails    int  // FailuresInWindow (always 0 unless Closed)
	parked   bool // Parked
}

// machine drives one breaker (and, when peeking, a twin that is never looked at) through steps.
type machine struct {
	t     *testing.T
	b     *Breaker
	twin  *Breaker
	pm    map[string]Permit
	twinP map[string]Permit
	trans []string
}

func newMachine(t *testing.T, s Settings, peek bool) *machine {
	t.Helper()
	p := mustPolicy(t, s)
	m := &machine{t: t, pm: map[string]Permit{}, twinP: map[string]Permit{}}
	m.b = p.NewBreaker(func(tr Transition) { m.trans = append(m.trans, describe(tr)) })
	if peek {
		m.twin = p.NewBreaker(nil)
	}
	return m
}

// stare looks at b around now many times, in every way that must change nothing, and returns what
// Ready(now) said.
func stare(b *Breaker, now time.Time) bool {
	for range 3 {
		for _, d := range []time.Duration{-time.Hour, -unit, 0, unit, 29 * unit, time.Hour, 1000 * time.Hour} {
			b.Ready(now.Add(d))
			b.Snapshot(now.Add(d))
			b.Idle(now.Add(d), 0)
		}
	}
	ok, _ := b.Ready(now)
	return ok
}

// act performs st on b with the permits in pm and returns Acquire's or Ready's answer.
func act(t *testing.T, b *Breaker, pm map[string]Permit, st step, i int) (ok, probe bool, retryAt time.Time) {
	t.Helper()
	now := at(st.at)
	switch st.do {
	case look:
	case acquire:
		p, ok := b.AcquireLease(now, st.lease)
		if st.p != "" {
			pm[st.p] = p
		}
		return ok, p.Probe(), time.Time{}
	case ready:
		ok, retryAt := b.Ready(now)
		return ok, false, retryAt
	default:
		p, found := pm[st.p]
		if st.p == "" {
			var ok bool
			if p, ok = b.Acquire(now); !ok {
				t.Fatalf("Acquire(t%d) = false, want true (step %d, before %v)", st.at, i, st.do)
			}
		} else if !found {
			t.Fatalf("step %d: %v on permit %q, which the table never acquired", i, st.do, st.p)
		}
		switch st.do {
		case success:
			p.Success(now)
		case failure:
			p.Failure(now, st.f)
		case neutral:
			p.Neutral(now)
		case release:
			p.Release(now)
		}
	}
	return false, false, time.Time{}
}

func (m *machine) run(steps []step) {
	t := m.t
	t.Helper()
	for i, st := range steps {
		now := at(st.at)
		var predicted bool
		if m.twin != nil {
			predicted = stare(m.b, now)
		}
		ok, probe, retryAt := act(t, m.b, m.pm, st, i)
		switch st.do {
		case acquire:
			if ok != st.ok {
				t.Fatalf("Acquire(t%d) = %v, want %v (step %d)", st.at, ok, st.ok, i)
			}
			if probe != (st.ok && st.probe) {
				t.Fatalf("Acquire(t%d).Probe() = %v, want %v (step %d)", st.at, probe, st.probe, i)
			}
		case ready:
			if ok != st.ok {
				t.Fatalf("Ready(t%d) = %v, want %v (step %d)", st.at, ok, st.ok, i)
			}
			if want := at(st.retry); !ok && !retryAt.Equal(want) {
				t.Fatalf("Ready(t%d) retryAt = %s, want %s (step %d)", st.at, tname(retryAt), tname(want), i)
			}
		}
		if m.twin != nil {
			if st.do == acquire && predicted != ok {
				t.Fatalf("Ready(t%d) = %v but Acquire(t%d) = %v (step %d)", st.at, predicted, st.at, ok, i)
			}
			tok, tprobe, tretry := act(t, m.twin, m.twinP, st, i)
			if tok != ok || tprobe != probe || !tretry.Equal(retryAt) {
				t.Fatalf("step %d: %v(t%d) = %v, %v, %s on the breaker looked at; %v, %v, %s on its twin",
					i, st.do, st.at, ok, probe, tname(retryAt), tok, tprobe, tname(tretry))
			}
			stare(m.b, now)
			if got, want := m.b.Snapshot(now), m.twin.Snapshot(now); got != want {
				t.Fatalf("Snapshot(t%d) = %+v, twin never looked at: %+v (step %d)", st.at, got, want, i)
			}
		}
		m.check(st, i)
	}
}

func (m *machine) check(st step, i int) {
	t := m.t
	t.Helper()
	s := m.b.Snapshot(at(st.at))
	if s.State != st.state {
		t.Fatalf("Snapshot(t%d).State = %v, want %v (step %d)", st.at, s.State, st.state, i)
	}
	var wantNext time.Time
	if st.state == Open {
		wantNext = at(st.next)
	}
	if !s.NextProbe.Equal(wantNext) {
		t.Fatalf("Snapshot(t%d).NextProbe = %s, want %s (step %d)", st.at, tname(s.NextProbe), tname(wantNext), i)
	}
	if s.Level != st.level {
		t.Fatalf("Snapshot(t%d).Level = %d, want %d (step %d)", st.at, s.Level, st.level, i)
	}
	if s.ProbesInFlight != st.inflight {
		t.Fatalf("Snapshot(t%d).ProbesInFlight = %d, want %d (step %d)", st.at, s.ProbesInFlight, st.inflight, i)
	}
	if s.FailuresInWindow != st.fails {
		t.Fatalf("Snapshot(t%d).FailuresInWindow = %d, want %d (step %d)", st.at, s.FailuresInWindow, st.fails, i)
	}
	if s.Parked != st.parked {
		t.Fatalf("Snapshot(t%d).Parked = %v, want %v (step %d)", st.at, s.Parked, st.parked, i)
	}
}

func (m *machine) wantTransitions(want []string) {
	m.t.Helper()
	if want == nil {
		return
	}
	if strings.Join(m.trans, "\n") != strings.Join(want, "\n") {
		m.t.Fatalf("transitions:\n\t%s\nwant:\n\t%s", strings.Join(m.trans, "\n\t"), strings.Join(want, "\n\t"))
	}
}

type machineCase struct {
	name  string
	s     Settings // jitter is disabled unless set
	steps []step
	trans []string // the transitions delivered, in order; nil: not checked
}

// runCases runs each case twice: plainly, and against a twin while staring at the breaker
// between steps, which must change nothing.
func runCases(t *testing.T, cases []machineCase) {
	t.Helper()
	for _, c := range cases {
		for _, peek := range []bool{false, true} {
			name := c.name
			if peek {
				name += "/looked_at"
			}
			t.Run(name, func(t *testing.T) {
				m := newMachine(t, fixed(c.s), peek)
				m.run(c.steps)
				m.wantTransitions(c.trans)
			})
		}
	}
}

// repeat returns n copies of st, at st.at, st.at+1, …, with fails counting up from st.fails by
// failsStep per step, capped at capFails.
func repeat(n int, st step, failsStep, capFails int) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = st
		out[i].at = st.at + i
		out[i].fails = min(st.fails+i*failsStep, capFails)
	}
	return out
}

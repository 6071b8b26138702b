package otelbreaker

import (
	"cmp"
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// gaugeSeries is one breaker (or several merged by WithOriginLabel) as the gauges report it.
type gaugeSeries struct {
	scope        pool.Scope
	exit, origin string
	state        breaker.State
	parked       bool
	toProbe      time.Duration // OPEN: until the next probe; HALF_OPEN: 0
	hasProbe     bool          // out of CLOSED: toProbe is reported
}

// severity orders states for merging and for the series cap: parked over OPEN over HALF_OPEN
// over CLOSED.
func (g *gaugeSeries) severity() int {
	switch {
	case g.parked:
		return 3
	case g.state == breaker.Open:
		return 2
	case g.state == breaker.HalfOpen:
		return 1
	}
	return 0
}

// stateValue is the value the proxybreaker.breaker.state gauge reports for a state.
func stateValue(s breaker.State) int64 {
	switch s {
	case breaker.Open:
		return StateOpen
	case breaker.HalfOpen:
		return StateHalfOpen
	}
	return StateClosed
}

// observe is the gauges' callback: it reads the bound pool's snapshot once.
func (o *Observer) observe(_ context.Context, ob metric.Observer) error {
	p := o.pool.Load()
	if p == nil {
		return nil
	}
	s := p.Snapshot()
	series, counts, parked := o.gaugeSeries(&s)
	for i := range series {
		g := &series[i]
		kv := make([]attribute.KeyValue, 0, 3)
		kv = append(exitOrigin(kv, g.exit, g.origin), AttrScope.String(g.scope.String()))
		set := metric.WithAttributeSet(attribute.NewSet(kv...))
		ob.ObserveInt64(o.in.state, stateValue(g.state), set)
		if g.hasProbe {
			ob.ObserveFloat64(o.in.timeToProbe, g.toProbe.Seconds(), set)
		}
	}
	for k, n := range counts {
		ob.ObserveInt64(o.in.breakers, int64(n), metric.WithAttributes(AttrScope.String(k.scope.String()), AttrState.String(k.state.String())))
	}
	ob.ObserveInt64(o.in.parked, int64(parked))
	return nil
}

type countKey struct {
	scope pool.Scope
	state breaker.State
}

// gaugeSeries turns a snapshot into the series the gauges report: labels mapped, merged where
// WithOriginLabel merges origins, capped at WithMaxSeries with the most severe first. It also
// counts breakers by scope and state, and parked exits, before any cap.
func (o *Observer) gaugeSeries(s *pool.Snapshot) (series []gaugeSeries, counts map[countKey]int, parked int) {
	counts = make(map[countKey]int)
	index := make(map[gaugeSeries]int) // by scope, exit and origin only
	add := func(scope pool.Scope, exit, origin string, b *breaker.Snapshot) {
		counts[countKey{scope, b.State}]++
		g := gaugeSeries{scope: scope, exit: exit, origin: o.lab.origin(origin), state: b.State, parked: b.Parked}
		if b.State == breaker.Open {
			g.toProbe = max(b.NextProbe.Sub(s.At), 0)
		}
		g.hasProbe = b.State != breaker.Closed
		key := gaugeSeries{scope: g.scope, exit: g.exit, origin: g.origin}
		i, ok := index[key]
		if !ok {
			index[key] = len(series)
			series = append(series, g)
			return
		}
		m := &series[i]
		if g.severity() > m.severity() {
			m.state, m.parked = g.state, g.parked
		}
		if g.hasProbe && (!m.hasProbe || g.toProbe < m.toProbe) {
			m.toProbe, m.hasProbe = g.toProbe, true
		}
	}
	for i := range s.Exits {
		e := &s.Exits[i]
		if e.Breaker.Parked {
			parked++
		}
		add(pool.ScopeExit, e.Exit, "", &e.Breaker)
	}
	for i := range s.Pairs {
		add(pool.ScopePair, s.Pairs[i].Exit, s.Pairs[i].Origin, &s.Pairs[i].Breaker)
	}
	for i := range s.Origins {
		add(pool.ScopeOrigin, "", s.Origins[i].Origin, &s.Origins[i].Breaker)
	}
	if o.maxSeries >= 0 && len(series) > o.maxSeries {
		slices.SortStableFunc(series, func(a, b gaugeSeries) int {
			return cmp.Or(
				cmp.Compare(b.severity(), a.severity()),
				cmp.Compare(a.scope, b.scope),
				cmp.Compare(a.exit, b.exit),
				cmp.Compare(a.origin, b.origin),
			)
		})
		series = series[:o.maxSeries]
	}
	return series, counts, parked
}

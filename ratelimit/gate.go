package ratelimit

import "golang.org/x/time/rate"

// Gate makes the buckets the transport needs, from validated Limits. It keeps no table of its
// own: the transport stores each bucket beside the exit, pair or origin it belongs to, so reading
// one is a pointer away. Safe for concurrent use.
type Gate struct {
	l Limits
}

// New validates l and returns its Gate. The error names every bad field.
func New(l Limits) (*Gate, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	return &Gate{l: l}, nil
}

// Limits returns the validated limits, defaults filled in.
func (g *Gate) Limits() Limits { return g.l }

// FailFast reports whether requests that find no token fail at once instead of waiting.
func (g *Gate) FailFast() bool { return g.l.FailFast }

// ExitLimit is the limit of the exit labelled label.
func (g *Gate) ExitLimit(label string) Limit {
	if l, ok := g.l.Exits[label]; ok {
		return l
	}
	return g.l.PerExit
}

// ExitBucket returns a new bucket for the exit labelled label, nil if it is not limited. With
// Limits.ExitSource set, a limited exit's bucket draws from the Source it returns (when not nil).
func (g *Gate) ExitBucket(label string) *Bucket {
	l := g.ExitLimit(label)
	if g.l.ExitSource != nil && !l.IsZero() && l.Rate != rate.Inf {
		if s := g.l.ExitSource(label, l); s != nil {
			return SourceBucket(s)
		}
	}
	return NewBucket(l)
}

// OriginBucket returns a new bucket for origin, nil if it is not limited.
func (g *Gate) OriginBucket(origin string) *Bucket {
	if l, ok := g.l.Origins[origin]; ok {
		return NewBucket(l)
	}
	return NewBucket(g.l.PerOrigin)
}

// PairsLimited reports whether every pair has a configured bucket (Limits.PerPair), which the
// transport must then make on a pair's first use rather than its first failure.
func (g *Gate) PairsLimited() bool { return !g.l.PerPair.IsZero() }

// NewPair returns the pace of a pair through the exit labelled exitLabel: nil, which paces nothing
// and costs nothing, when there is no per-pair limit and adaptation is disabled. Every method of
// Pair accepts a nil *Pair.
func (g *Gate) NewPair(exitLabel string) *Pair {
	if g.l.Adaptive.Disabled && g.l.PerPair.IsZero() {
		return nil
	}
	p := &Pair{cfg: &g.l.Adaptive, ceiling: g.l.Adaptive.Ceiling}
	if !g.l.PerPair.IsZero() {
		p.static = true
		p.ceiling = g.l.PerPair.Rate
		p.bucket.Store(NewBucket(g.l.PerPair))
	} else if el := g.ExitLimit(exitLabel); !el.IsZero() {
		p.ceiling = el.Rate
	}
	if p.ceiling == rate.Inf { // an unlimited exit or pair: adapt towards the default ceiling
		p.static, p.ceiling = false, g.l.Adaptive.Ceiling
	}
	return p
}

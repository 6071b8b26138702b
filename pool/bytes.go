package pool

import (
	"sync"
	"sync/atomic"
	"time"
)

// Traffic is what attempts moved through an exit, in bytes as they crossed the wire between the
// client and the proxy: request and response headers and bodies, and, on a connection made for the
// attempt, the proxy's own exchanges (CONNECT, SOCKS5) and the TLS of a tunnel, handshake included.
// Package transport counts it on each exit's connections (see transport.AttemptResult.Bytes).
type Traffic struct {
	Sent     int64 `json:"sent"`     // bytes written towards the proxy
	Received int64 `json:"received"` // bytes read from the proxy
}

// Add returns t plus u.
func (t Traffic) Add(u Traffic) Traffic {
	return Traffic{Sent: t.Sent + u.Sent, Received: t.Received + u.Received}
}

// ReportTrafficAt is ReportAt that also counts tr, the bytes the attempt moved, towards the totals
// of its exit (ExitStatus.Bytes) and of its origin (Snapshot.Traffic). The counting is two atomic
// additions per total, at report time: the pick never reads it. A lease already reported, or the
// zero Lease, counts nothing.
func (l *Lease) ReportTrafficAt(now time.Time, v Verdict, tr Traffic) Reported {
	if l.p == nil || l.done {
		return Reported{}
	}
	if tr != (Traffic{}) {
		l.p.traffic.counter(l.t.id).add(tr)
		l.t.origin.traffic.add(tr)
	}
	return l.report(now, v, tr)
}

// trafficCounter is a running Traffic total, safe for concurrent use.
type trafficCounter struct {
	sent, received atomic.Int64
	spend          atomic.Int64 // nano-units (spend.go)
}

func (c *trafficCounter) add(t Traffic) {
	c.sent.Add(t.Sent)
	c.received.Add(t.Received)
}

func (c *trafficCounter) load() Traffic {
	if c == nil {
		return Traffic{}
	}
	return Traffic{Sent: c.sent.Load(), Received: c.received.Load()}
}

// Exits' traffic is kept by exit id in chunks of trafficChunk counters (4 KB), allocated when an
// exit of the chunk first reports bytes: ids are never reused, so a removed exit's total stays
// with its id and a new exit starts from zero.
const (
	trafficShift = 8
	trafficChunk = 1 << trafficShift
)

// trafficTable is one trafficCounter per exit id. Readers and adders load the directory with one
// atomic load; growing it takes mu.
type trafficTable struct {
	mu  sync.Mutex
	dir atomic.Pointer[[]*[trafficChunk]trafficCounter]
}

// lookup returns id's counter, or nil when its chunk was never made.
func (t *trafficTable) lookup(id uint32) *trafficCounter {
	d := t.dir.Load()
	if d == nil || int(id>>trafficShift) >= len(*d) {
		return nil
	}
	if c := (*d)[id>>trafficShift]; c != nil {
		return &c[id&(trafficChunk-1)]
	}
	return nil
}

// counter returns id's counter, making its chunk the first time.
func (t *trafficTable) counter(id uint32) *trafficCounter {
	if c := t.lookup(id); c != nil {
		return c
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.lookup(id); c != nil {
		return c
	}
	var dir []*[trafficChunk]trafficCounter
	if d := t.dir.Load(); d != nil {
		dir = *d
	}
	ci := int(id >> trafficShift)
	grown := make([]*[trafficChunk]trafficCounter, max(len(dir), ci+1))
	copy(grown, dir)
	grown[ci] = new([trafficChunk]trafficCounter)
	t.dir.Store(&grown)
	return &grown[ci][id&(trafficChunk-1)]
}

// OriginTraffic is the bytes that attempts for one origin moved, through every exit.
type OriginTraffic struct {
	Origin string  `json:"origin"`
	Bytes  Traffic `json:"bytes"`
	Spend  float64 `json:"spend,omitempty"` // what the attempts cost, in the pool's cost unit (spend.go)
}

// AddTraffic counts tr, bytes that moved through e for origin outside any lease's report, towards
// the same totals as Lease.ReportTrafficAt: package transport counts here what a connection
// carried after its last attempt claimed its bytes, or without one (its TLS close; a connection
// dialled for a request that another connection served). An exit no longer in the pool counts
// nothing, and the origin's total counts only while the pool keeps the origin. Safe for
// concurrent use.
func (p *Pool) AddTraffic(e *Exit, origin string, tr Traffic) {
	if e == nil || tr == (Traffic{}) {
		return
	}
	es := p.set.Load().byLabel[e.label]
	if es == nil {
		return
	}
	p.traffic.counter(es.id).add(tr)
	o := p.origins.lookup(origin) // live, or nil
	if o != nil {
		o.traffic.add(tr)
	}
	spend := p.spendOutside(es, o, tr)
	var ev ConnectionTraffic
	made := false
	for _, x := range p.obs.load() {
		if to, ok := x.o.(TrafficObserver); ok {
			if !made {
				ev, made = ConnectionTraffic{Exit: es.exit, Origin: origin, Bytes: tr, Spend: units(spend)}, true
			}
			to.ConnectionTraffic(ev)
		}
	}
}

// ConnectionOrigin is the origin label a metric gives bytes that no attempt claimed
// (ConnectionTraffic): package otelbreaker records them on the bytes and spend counters under
// it, so that a counter summed per exit holds every byte the exit's connections carried.
const ConnectionOrigin = "(connection)"

// ConnectionTraffic is bytes that moved through an exit outside any attempt's report
// (AddTraffic): what a connection carried after its last attempt claimed, such as its TLS
// close, or HTTP/2 frames that came after.
type ConnectionTraffic struct {
	Exit *Exit
	// Origin is the origin of the attempt that dialled the connection, "" when unknown. The
	// totals of Snapshot.Traffic count the bytes there; metrics label them ConnectionOrigin.
	Origin string
	Bytes  Traffic
	Spend  float64 // what they cost, in the pool's cost unit (their price per byte)
}

// TrafficObserver is implemented by observers that want to hear of the bytes counted outside any
// attempt. An Observer given to the pool that also implements it is called on each such count —
// once per connection that closes with bytes unclaimed — with no lock held, possibly
// concurrently, from the goroutine that closed the connection; it must be quick.
type TrafficObserver interface {
	ConnectionTraffic(t ConnectionTraffic)
}

package pool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/proxybreaker/proxybreaker/pool"
)

// TestReportTrafficCountsPerExitAndOrigin: each report's bytes reach its exit's total and its
// origin's, once per lease, whatever the verdict; the snapshot and its JSON show them.
func TestReportTrafficCountsPerExitAndOrigin(t *testing.T) {
	p, clk := newLeasePool(t)
	steps := []struct {
		origin string
		v      pool.Verdict
		tr     pool.Traffic
	}{
		{"a.example", okVerdict, pool.Traffic{Sent: 100, Received: 1000}},
		{"b.example", okVerdict, pool.Traffic{Sent: 10, Received: 20}},
		{"a.example", pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled}, pool.Traffic{Sent: 1, Received: 2}},
	}
	for i, st := range steps {
		l := mustPick(t, p, st.origin)
		l.ReportTrafficAt(clk.Now(), st.v, st.tr)
		l.ReportTrafficAt(clk.Now(), st.v, st.tr) // a second report counts nothing
		if i == 0 {
			if got, want := p.Snapshot().Exits[0].Bytes, st.tr; got != want {
				t.Fatalf("step %d: Exits[0].Bytes = %+v, want %+v", i, got, want)
			}
		}
	}
	s := p.Snapshot()
	if got, want := s.Exits[0].Bytes, (pool.Traffic{Sent: 111, Received: 1022}); got != want {
		t.Errorf("Exits[0].Bytes = %+v, want %+v", got, want)
	}
	want := []pool.OriginTraffic{
		{Origin: "a.example", Bytes: pool.Traffic{Sent: 101, Received: 1002}},
		{Origin: "b.example", Bytes: pool.Traffic{Sent: 10, Received: 20}},
	}
	if len(s.Traffic) != len(want) {
		t.Fatalf("Traffic = %+v, want %+v", s.Traffic, want)
	}
	for i := range want {
		if s.Traffic[i] != want[i] {
			t.Errorf("Traffic[%d] = %+v, want %+v", i, s.Traffic[i], want[i])
		}
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, frag := range []string{`"bytes":{"sent":111,"received":1022}`, `{"origin":"b.example","bytes":{"sent":10,"received":20}}`} {
		if !strings.Contains(string(b), frag) {
			t.Errorf("json.Marshal(snapshot) = %s, want it to contain %s", b, frag)
		}
	}
	var zero pool.Lease
	if got := zero.ReportTrafficAt(clk.Now(), okVerdict, pool.Traffic{Sent: 1}); got != (pool.Reported{}) {
		t.Errorf("zero Lease.ReportTrafficAt = %+v, want the zero Reported", got)
	}
}

// TestReportTrafficConcurrent: reports from many goroutines, for exits whose ids span several of
// the table's chunks, add up exactly.
func TestReportTrafficConcurrent(t *testing.T) {
	var exits []*pool.Exit
	for i := range 300 { // more than one chunk of 256 ids
		exits = append(exits, pool.MustParseExit(fmt.Sprintf("10.0.1.%d:%d", i%250, 3000+i)))
	}
	p, err := pool.New(pool.WithExits(exits...), pool.WithSeed(3))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				l, err := p.Pick(context.Background(), pool.Request{Origin: "c.example"})
				if err != nil {
					t.Error(err)
					return
				}
				l.ReportTrafficAt(p.Clock().Now(), okVerdict, pool.Traffic{Sent: 3, Received: 5})
			}
		})
	}
	wg.Wait()
	var sum pool.Traffic
	for _, es := range p.Snapshot().Exits {
		sum = sum.Add(es.Bytes)
	}
	if want := (pool.Traffic{Sent: 3 * workers * rounds, Received: 5 * workers * rounds}); sum != want {
		t.Errorf("sum of Exits[].Bytes = %+v, want %+v", sum, want)
	}
}

// TestAddTraffic: bytes counted outside a lease reach the exit's total, and the origin's when the
// pool keeps that origin; an origin it does not keep is not made for them, and an exit removed
// from the pool counts nothing.
func TestAddTraffic(t *testing.T) {
	p, clk := newLeasePool(t)
	e := p.Exits()[0]
	l := mustPick(t, p, "kept.example")
	l.ReportTrafficAt(clk.Now(), okVerdict, pool.Traffic{Sent: 1})
	p.AddTraffic(e, "kept.example", pool.Traffic{Sent: 10, Received: 20})
	p.AddTraffic(e, "unknown.example", pool.Traffic{Sent: 100})
	s := p.Snapshot()
	if got, want := s.Exits[0].Bytes, (pool.Traffic{Sent: 111, Received: 20}); got != want {
		t.Errorf("Exits[0].Bytes = %+v, want %+v", got, want)
	}
	if want := []pool.OriginTraffic{{Origin: "kept.example", Bytes: pool.Traffic{Sent: 11, Received: 20}}}; len(s.Traffic) != 1 || s.Traffic[0] != want[0] {
		t.Errorf("Traffic = %+v, want %+v", s.Traffic, want)
	}
	if err := p.Remove(e.Label()); err != nil {
		t.Fatal(err)
	}
	p.AddTraffic(e, "kept.example", pool.Traffic{Sent: 1000}) // must not panic or count
	p.AddTraffic(nil, "kept.example", pool.Traffic{Sent: 1000})
	if got := p.Snapshot().Traffic; len(got) != 1 || got[0].Bytes.Sent != 11 {
		t.Errorf("Traffic after AddTraffic for a removed exit = %+v, want kept.example's 11 bytes sent", got)
	}
}

package measure

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/sony/gobreaker/v2"
)

// Pick and report, beside a peer (issue 28's last Done-when item): a pool of N exits for one
// origin in which one exit in ten has its pair parked OPEN; each op picks an exit for the origin
// and reports one success on the lease (PickAt + ReportAt, one instant of a fake clock). The peer
// is a pool of gobreaker/v2 two-step breakers, one per exit (a slice, no lock: the breakers lock
// themselves), one in ten tripped OPEN: it draws a random exit whose breaker is not OPEN (8 draws,
// then a scan, as ours does), takes its permit (Allow) and reports a success (done(nil)). Both
// run in the same process, alternating, so their ratio comes from one run.

// PickReportRow is one pool size's pick + report cost for ours and the peer.
type PickReportRow struct {
	Exits      int
	Ours, Peer PickCost // BytesPerPair unused
}

// PickReport measures ours and the peer at exits exits, rounds times each, alternating, and
// returns the medians (median above).
func PickReport(exits, rounds int, seed uint64) (PickReportRow, error) {
	row := PickReportRow{Exits: exits}
	var ours, peer [2][]Timing // serial, parallel
	for range max(rounds, 1) {
		o, err := pickReportOurs(exits, seed)
		if err != nil {
			return row, err
		}
		runtime.GC()
		pe, err := pickReportPeer(exits, seed)
		if err != nil {
			return row, err
		}
		runtime.GC()
		ours[0], ours[1] = append(ours[0], o.Serial), append(ours[1], o.Parallel)
		peer[0], peer[1] = append(peer[0], pe.Serial), append(peer[1], pe.Parallel)
	}
	row.Ours = PickCost{Serial: median(ours[0]), Parallel: median(ours[1])}
	row.Peer = PickCost{Serial: median(peer[0]), Parallel: median(peer[1])}
	return row, nil
}

func pickReportOurs(exits int, seed uint64) (PickCost, error) {
	p, list, keys, now, err := newPickPool(exits, 1)
	if err != nil {
		return PickCost{}, err
	}
	defer p.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, uint64(exits)))
	for _, e := range parked(rng, identity(exits)) {
		l, err := p.PickAt(ctx, now, pool.Request{Origin: keys[0], Exit: list[e].Label()})
		if err != nil {
			return PickCost{}, fmt.Errorf("bench: pinned pick: %w", err)
		}
		l.ReportAt(now, pool.Verdict{Outcome: pool.Permanent, Class: pool.ClassProxyDenied})
	}
	var failed atomic.Pointer[error]
	success := pool.Verdict{Outcome: pool.Success}
	op := func(*rand.Rand) {
		l, err := p.PickAt(ctx, now, pool.Request{Origin: keys[0]})
		if err != nil {
			e := err // a copy, so that only this branch moves an error to the heap
			failed.CompareAndSwap(nil, &e)
			return
		}
		l.ReportAt(now, success)
	}
	var c PickCost
	c.Serial, c.Parallel = loops(op, seed)
	if err := failed.Load(); err != nil {
		return c, *err
	}
	return c, nil
}

func pickReportPeer(exits int, seed uint64) (PickCost, error) {
	cbs := make([]*gobreaker.TwoStepCircuitBreaker[struct{}], exits)
	st := gobreaker.Settings{
		Timeout:     15 * time.Minute, // as long as ours parks a pair
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}
	for i := range cbs {
		st.Name = "x" + strconv.Itoa(i)
		cbs[i] = gobreaker.NewTwoStepCircuitBreaker[struct{}](st)
	}
	fail := errors.New("bench: denied")
	rng := rand.New(rand.NewPCG(seed, uint64(exits)))
	for _, e := range parked(rng, identity(exits)) {
		done, err := cbs[e].Allow()
		if err != nil {
			return PickCost{}, err
		}
		done(fail)
	}
	ready := func(e int) bool { return cbs[e].State() != gobreaker.StateOpen }
	var failed atomic.Pointer[error]
	op := func(r *rand.Rand) {
		e, err := peerDraw(r, exits, ready)
		if err == nil {
			var done func(error)
			if done, err = cbs[e].Allow(); err == nil {
				done(nil)
				return
			}
		}
		failed.CompareAndSwap(nil, &err)
	}
	var c PickCost
	c.Serial, c.Parallel = loops(op, seed)
	if err := failed.Load(); err != nil {
		return c, *err
	}
	return c, nil
}

package measure

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/sony/gobreaker/v2"
)

// The pick at scale, beside a peer: a pool of many exits and origins in which, for every origin,
// one exit in ten has its pair parked OPEN (a proxy denial, through the pool's public API), and
// each op picks for a random origin and gives the lease back unused (PickAt + ReleaseAt), at one
// instant of a fake clock. The peer keeps a gobreaker/v2 circuit breaker per tracked (exit, origin)
// pair in a map, as a user would build it, and picks a random exit whose pair breaker is not OPEN
// (up to 8 draws).

// openShare is the share of each origin's pairs parked OPEN: one exit in openShare.
const openShare = 10

// PickRow is one pool size's pick cost and memory, for ours and the peer.
type PickRow struct {
	Exits, Origins int
	Pairs          int // tracked pairs (parked OPEN)
	Ours, Peer     PickCost
}

// PickCost is one implementation's figures at one size.
type PickCost struct {
	Serial, Parallel Timing
	BytesPerPair     float64 // heap growth per tracked pair
}

// Pick measures ours and the peer at exits × origins.
func Pick(exits, origins int, seed uint64) (PickRow, error) {
	row := PickRow{Exits: exits, Origins: origins, Pairs: origins * (exits / openShare)}
	ours, err := pickOurs(exits, origins, seed)
	if err != nil {
		return row, err
	}
	row.Ours = ours
	runtime.GC()
	peer, err := pickPeer(exits, origins, seed)
	if err != nil {
		return row, err
	}
	row.Peer = peer
	runtime.GC()
	return row, nil
}

// parked returns, for origin o, the exits (by index) whose pair is parked: exits/openShare of them,
// a uniform random subset (a partial Fisher–Yates shuffle of perm).
func parked(rng *rand.Rand, perm []int) []int {
	k := len(perm) / openShare
	for j := range k {
		r := j + rng.IntN(len(perm)-j)
		perm[j], perm[r] = perm[r], perm[j]
	}
	return perm[:k]
}

// newPickPool returns a pool of exits on a fake clock at now, with the state of each of origins
// origins already made (one pick released), so that what follows counts pairs alone.
func newPickPool(exits, origins int) (*pool.Pool, []*pool.Exit, []string, time.Time, error) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	list := testkit.Exits("x", exits)
	p, err := pool.New(pool.WithExits(list...), pool.WithClock(clock.NewFake(now)))
	if err != nil {
		return nil, nil, nil, now, err
	}
	keys := originKeys(origins)
	for _, k := range keys {
		l, err := p.PickAt(context.Background(), now, pool.Request{Origin: k})
		if err != nil {
			p.Close()
			return nil, nil, nil, now, err
		}
		l.ReleaseAt(now)
	}
	return p, list, keys, now, nil
}

func originKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "o" + strconv.Itoa(i) + ".bench.example"
	}
	return keys
}

func identity(n int) []int {
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	return perm
}

func pickOurs(exits, origins int, seed uint64) (PickCost, error) {
	p, list, keys, now, err := newPickPool(exits, origins)
	if err != nil {
		return PickCost{}, err
	}
	defer p.Close()
	ctx := context.Background()
	before := heap()
	rng, perm := rand.New(rand.NewPCG(seed, uint64(exits))), identity(exits)
	for _, k := range keys {
		for _, e := range parked(rng, perm) {
			l, err := p.PickAt(ctx, now, pool.Request{Origin: k, Exit: list[e].Label()})
			if err != nil {
				return PickCost{}, fmt.Errorf("bench: pinned pick: %w", err)
			}
			l.ReportAt(now, pool.Verdict{Outcome: pool.Permanent, Class: pool.ClassProxyDenied})
		}
	}
	perm = nil
	pairs := origins * (exits / openShare)
	c := PickCost{BytesPerPair: float64(int64(heap())-int64(before)) / float64(pairs)}
	var failed atomic.Pointer[error]
	pick := func(r *rand.Rand) {
		l, err := p.PickAt(ctx, now, pool.Request{Origin: keys[r.IntN(len(keys))]})
		if err != nil {
			e := err // a copy, so that only this branch moves an error to the heap
			failed.CompareAndSwap(nil, &e)
			return
		}
		l.ReleaseAt(now)
	}
	c.Serial, c.Parallel = loops(pick, seed)
	if err := failed.Load(); err != nil {
		return c, *err
	}
	return c, nil
}

// peerPool is the peer: a gobreaker per tracked pair, in a map under a read-write lock.
type peerPool struct {
	exits []string
	mu    sync.RWMutex
	pairs map[peerKey]*gobreaker.CircuitBreaker[struct{}]
}

type peerKey struct {
	exit   int32
	origin string
}

var errPeerNoExit = errors.New("bench: peer: no exit ready")

func (pp *peerPool) pick(r *rand.Rand, origin string) (int, error) {
	return peerDraw(r, len(pp.exits), func(e int) bool { return pp.ready(e, origin) })
}

// peerDraw is the peers' pick among n exits: up to 8 random draws for one that is ready, then a
// scan from a random start, as ours does.
func peerDraw(r *rand.Rand, n int, ready func(int) bool) (int, error) {
	for range 8 {
		if e := r.IntN(n); ready(e) {
			return e, nil
		}
	}
	start := r.IntN(n)
	for k := range n {
		if e := (start + k) % n; ready(e) {
			return e, nil
		}
	}
	return 0, errPeerNoExit
}

func (pp *peerPool) ready(e int, origin string) bool {
	pp.mu.RLock()
	cb := pp.pairs[peerKey{int32(e), origin}]
	pp.mu.RUnlock()
	return cb == nil || cb.State() != gobreaker.StateOpen
}

func pickPeer(exits, origins int, seed uint64) (PickCost, error) {
	pp := &peerPool{exits: make([]string, exits), pairs: map[peerKey]*gobreaker.CircuitBreaker[struct{}]{}}
	for i := range pp.exits {
		pp.exits[i] = "x" + strconv.Itoa(i)
	}
	keys := originKeys(origins)
	before := heap()
	rng, perm := rand.New(rand.NewPCG(seed, uint64(exits))), identity(exits)
	fail := errors.New("bench: denied")
	st := gobreaker.Settings{
		Timeout:     15 * time.Minute, // as long as ours parks a pair
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}
	for _, k := range keys {
		for _, e := range parked(rng, perm) {
			st.Name = pp.exits[e] + "|" + k
			cb := gobreaker.NewCircuitBreaker[struct{}](st)
			cb.Execute(func() (struct{}, error) { return struct{}{}, fail })
			pp.pairs[peerKey{int32(e), k}] = cb
		}
	}
	perm = nil
	pairs := origins * (exits / openShare)
	c := PickCost{BytesPerPair: float64(int64(heap())-int64(before)) / float64(pairs)}
	var failed atomic.Pointer[error]
	pick := func(r *rand.Rand) {
		if _, err := pp.pick(r, keys[r.IntN(len(keys))]); err != nil {
			e := err
			failed.CompareAndSwap(nil, &e)
		}
	}
	c.Serial, c.Parallel = loops(pick, seed)
	if err := failed.Load(); err != nil {
		return c, *err
	}
	return c, nil
}

// loops runs one op, serially and with RunParallel, each goroutine with its own random source.
func loops(op func(*rand.Rand), seed uint64) (serial, parallel Timing) {
	serial = timing(testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		r := rand.New(rand.NewPCG(seed, 1))
		for b.Loop() {
			op(r)
		}
	}))
	var streams atomic.Uint64
	parallel = timing(testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			r := rand.New(rand.NewPCG(seed, streams.Add(1)+1))
			for pb.Next() {
				op(r)
			}
		})
	}))
	return serial, parallel
}

// PairBytes makes every (exit, origin) pair of ne × no hold a breaker, each given the verdict v
// through a pinned pick, and returns the heap growth per pair (the origins' own state made first,
// outside the count).
func PairBytes(ne, no int, v pool.Verdict) (float64, error) {
	p, list, keys, now, err := newPickPool(ne, no)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	ctx := context.Background()
	before := heap()
	for _, e := range list {
		for _, k := range keys {
			l, err := p.PickAt(ctx, now, pool.Request{Origin: k, Exit: e.Label()})
			if err != nil {
				return 0, fmt.Errorf("bench: pinned pick: %w", err)
			}
			l.ReportAt(now, v)
		}
	}
	after := heap()
	if n := len(p.Snapshot().Pairs); n != ne*no {
		return 0, fmt.Errorf("bench: %d pairs tracked, want %d", n, ne*no)
	}
	return float64(int64(after)-int64(before)) / float64(ne*no), nil
}

package sim

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/transport"
)

// Metrics is what one strategy got done in one run.
type Metrics struct {
	Strategy    string
	Attempts    int // requests that left through an exit
	Successes   int // goodput: 200s
	RateLimited int // 429s provoked
	Blocked     int // challenge pages from banned pairs
	Timeouts    int
	DeadHits    int // refused by a dead exit's gateway
	AuthHits    int // 407s
	Refusals    int // requests the strategy refused to send (no exit ready)
	// TimeoutTime is worker time spent waiting for attempts that timed out.
	TimeoutTime time.Duration
	// WorkerTime is workers × simulated duration.
	WorkerTime time.Duration
	// Recovery holds, for each ban episode that ended at least RecoveryHorizon before the end of the
	// run, how long after it ended the pair next carried a success; Unrecovered counts those that
	// carried none by the end.
	Recovery    []time.Duration
	Unrecovered int
}

// Wasted is the attempts that did not succeed.
func (m *Metrics) Wasted() int { return m.Attempts - m.Successes }

// MedianRecovery is the median of Recovery, counting unrecovered episodes as longer than any; -1
// when more than half never recovered, 0 when there was nothing to measure.
func (m *Metrics) MedianRecovery() time.Duration {
	n := len(m.Recovery) + m.Unrecovered
	if n == 0 {
		return 0
	}
	if (n+1)/2 > len(m.Recovery) {
		return -1
	}
	s := slices.Clone(m.Recovery)
	slices.Sort(s)
	return s[(n-1)/2]
}

// RecoveryHorizon is how long before the end of a run a ban must end to count in Recovery.
const RecoveryHorizon = 15 * time.Minute

// Env is what a strategy is built from: the run's clock, the simulated base and the exits.
type Env struct {
	Scenario Scenario
	Clock    *clock.Fake
	Truth    *Truth
	// Base sends a request through the exit named by WithExit(ctx) or transport.ExitFromContext.
	Base  http.RoundTripper
	Exits []*transport.Exit
	// Uint64 and Float64 are this strategy's seeded random sources, safe for concurrent use.
	Uint64  func() uint64
	Float64 func() float64

	byLabel map[string]int
}

// Strategy builds the RoundTripper a run's workers send through.
type Strategy struct {
	Name string
	New  func(env *Env) (http.RoundTripper, func(), error) // the func closes what New made
}

// RefusedError is what a peer strategy returns when it sends nothing: no exit is admitted.
type RefusedError struct{ RetryIn time.Duration }

func (e *RefusedError) Error() string { return "sim: refused, retry in " + e.RetryIn.String() }

type ctxKey int

const (
	workerKey ctxKey = iota
	exitKey
)

// WithExit returns ctx naming exit index e for the simulated base.
func WithExit(ctx context.Context, e int) context.Context { return context.WithValue(ctx, exitKey, e) }

// OriginURL is the URL workers ask for on origin o.
func OriginURL(o int) string { return "http://o" + strconv.Itoa(o) + ".test/" }

// Run plays sc with one strategy and returns its metrics. It is deterministic for sc.Seed.
func Run(sc Scenario, st Strategy) (Metrics, error) {
	s := &sched{
		sc: sc, clock: clock.NewFake(Epoch), truth: NewTruth(sc), end: Epoch.Add(sc.Duration),
		resume: make([]chan struct{}, sc.Workers), yield: make(chan struct{}),
		m:    Metrics{Strategy: st.Name, WorkerTime: time.Duration(sc.Workers) * sc.Duration},
		next: make([]int, sc.Exits*sc.Origins),
	}
	env := &Env{Scenario: sc, Clock: s.clock, Truth: s.truth, Base: &base{s: s}, byLabel: map[string]int{}}
	for e := range sc.Exits {
		x, err := transport.ParseExit(fmt.Sprintf("http://127.0.0.1:%d", 20000+e))
		if err != nil {
			return Metrics{}, err
		}
		x = x.WithLabel(fmt.Sprintf("x%03d", e))
		env.Exits = append(env.Exits, x)
		env.byLabel[x.Label()] = e
	}
	env.Base.(*base).env = env
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(sc.Seed, mix(uint64(len(st.Name))^0x5eed)))
	env.Uint64 = func() uint64 { mu.Lock(); defer mu.Unlock(); return r.Uint64() }
	env.Float64 = func() float64 { mu.Lock(); defer mu.Unlock(); return r.Float64() }
	rt, closeFn, err := st.New(env)
	if err != nil {
		return Metrics{}, err
	}
	for w := range sc.Workers {
		s.resume[w] = make(chan struct{})
		s.push(Epoch, w)
		go s.worker(w, rt)
	}
	for s.h.Len() > 0 {
		ev := heap.Pop(&s.h).(event)
		if ev.at.After(s.end) {
			break
		}
		s.clock.Set(ev.at)
		s.resume[ev.w] <- struct{}{}
		<-s.yield
	}
	s.stopping = true // read by workers only after a resume: the channel orders it
	for w := range sc.Workers {
		s.resume[w] <- struct{}{}
		<-s.yield
	}
	if closeFn != nil {
		closeFn()
	}
	s.finishRecovery()
	return s.m, nil
}

type event struct {
	at  time.Time
	seq uint64
	w   int
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// sched runs one worker goroutine at a time: the coordinator resumes the worker of the earliest
// event and waits until it yields (blocked on its next event, or gone).
type sched struct {
	sc       Scenario
	clock    *clock.Fake
	truth    *Truth
	end      time.Time
	h        eventHeap
	seq      uint64
	resume   []chan struct{}
	yield    chan struct{}
	stopping bool
	m        Metrics
	next     []int // by pair: the first ban episode not yet recovered from
}

func (s *sched) push(at time.Time, w int) {
	s.seq++
	heap.Push(&s.h, event{at: at, seq: s.seq, w: w})
}

// wait makes worker w busy for d of simulated time. It reports false when the run is over.
func (s *sched) wait(w int, d time.Duration) bool {
	if s.stopping {
		return false
	}
	s.push(s.clock.Now().Add(d), w)
	s.yield <- struct{}{}
	<-s.resume[w]
	return !s.stopping
}

func (s *sched) worker(w int, rt http.RoundTripper) {
	<-s.resume[w]
	r := rand.New(rand.NewPCG(s.sc.Seed, uint64(w)+1))
	ctx := context.WithValue(context.Background(), workerKey, w)
	urls := make([]string, s.sc.Origins)
	for o := range urls {
		urls[o] = OriginURL(o)
	}
	for !s.stopping {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, urls[r.IntN(len(urls))], nil)
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			io.Copy(io.Discard, resp.Body) // the transport confirms a success when the body ends
			resp.Body.Close()
		}
		var delay time.Duration
		if in, ok := refusal(err); ok {
			if !s.stopping {
				s.m.Refusals++
			}
			delay = min(max(in, 100*time.Millisecond), max(s.sc.MaxRefusalWait, 100*time.Millisecond))
		}
		if !s.wait(w, delay) {
			break
		}
	}
	s.yield <- struct{}{}
}

// refusal reports whether err says the request was not sent, and when to try again.
func refusal(err error) (time.Duration, bool) {
	var nh *transport.NoHealthyExitError
	var ou *transport.OriginUnhealthyError
	var th *transport.ThrottledError
	var re *RefusedError
	switch {
	case err == nil:
		return 0, false
	case errors.As(err, &nh):
		return nh.RetryIn, true
	case errors.As(err, &ou):
		return ou.RetryIn, true
	case errors.As(err, &th):
		return th.RetryIn, true
	case errors.As(err, &re):
		return re.RetryIn, true
	}
	return 0, false
}

func (s *sched) record(e, o int, r Result) {
	m := &s.m
	m.Attempts++
	switch {
	case r.Err == ErrTimeout:
		m.Timeouts++
		m.TimeoutTime += r.Latency
	case r.Err == ErrRefused:
		m.DeadHits++
	case r.Status == 407:
		m.AuthHits++
	case r.Status == 403:
		m.Blocked++
	case r.Status == 429:
		m.RateLimited++
	case r.OK():
		m.Successes++
		p := e*s.sc.Origins + o
		bans := s.truth.bans[p]
		now := s.clock.Now()
		for s.next[p] < len(bans) && !bans[s.next[p]].To.After(now) {
			if s.counts(bans[s.next[p]]) {
				m.Recovery = append(m.Recovery, now.Sub(bans[s.next[p]].To))
			}
			s.next[p]++
		}
	}
}

func (s *sched) counts(w Window) bool { return !w.To.After(s.end.Add(-RecoveryHorizon)) }

func (s *sched) finishRecovery() {
	for p, bans := range s.truth.bans {
		for _, w := range bans[s.next[p]:] {
			if s.counts(w) {
				s.m.Unrecovered++
			}
		}
	}
}

// base is the simulated network: it asks the ground truth what the attempt gets, keeps the worker
// busy for its latency, then answers as net/http would.
type base struct {
	s   *sched
	env *Env
}

func (b *base) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	w := ctx.Value(workerKey).(int)
	e, ok := ctx.Value(exitKey).(int)
	if !ok {
		x, found := transport.ExitFromContext(ctx)
		if !found {
			return nil, errors.New("sim: request without an exit")
		}
		e = b.env.byLabel[x.Label()]
	}
	o, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(req.URL.Host, "o"), ".test"))
	if err != nil {
		return nil, fmt.Errorf("sim: unknown origin %q", req.URL.Host)
	}
	s := b.s
	r := s.truth.Send(e, o, s.clock.Now())
	if !s.wait(w, r.Latency) {
		return nil, errors.New("sim: run over")
	}
	s.record(e, o, r)
	switch r.Err {
	case ErrTimeout:
		return nil, timeoutError{}
	case ErrRefused:
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	resp := &http.Response{
		StatusCode: r.Status, Status: strconv.Itoa(r.Status) + " " + http.StatusText(r.Status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Request: req,
	}
	body := "ok"
	switch r.Status {
	case 429:
		resp.Header.Set("Retry-After", strconv.Itoa(int(r.RetryAfter/time.Second)))
		body = "slow down"
	case 403:
		resp.Header.Set("Server", "cloudflare")
		resp.Header.Set("Cf-Mitigated", "challenge")
		body = "<html><title>Just a moment...</title></html>"
	case 407:
		body = "proxy auth required"
	}
	resp.Body = io.NopCloser(strings.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, nil
}

// timeoutError is a net.Error that timed out, as a header timeout reports.
type timeoutError struct{}

func (timeoutError) Error() string   { return "sim: timeout awaiting response headers" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// Defaults for ReheatConfig fields left at their zero value.
const (
	DefaultReheatInterval    = 5 * time.Second
	DefaultReheatConcurrency = 4
	DefaultReheatTimeout     = 30 * time.Second
	DefaultReheatBodyLimit   = 4 << 10
)

// ReheatConfig describes a Reheater. Transport and ProbeURLs are required; every other field's
// zero value means its default.
type ReheatConfig struct {
	// Transport is the live transport: its pool says which breakers are due (pool.Pool.DueProbes),
	// and probes go through it, pinned to the exit (transport.ContextWithExit), so they take the
	// exit's permits by the same path as live traffic.
	Transport *transport.Transport
	// Clock is the clock the loop waits on and reads. Default: the pool's own (pool.Pool.Clock),
	// which is the one its breakers judge windows by; give another only if you know why.
	Clock clock.Clock
	// ProbeURLs maps an origin key to a cheap URL on that origin (robots.txt, a health page, a
	// known 404): the URL a due (exit, origin) pair is probed with. Each URL's origin key
	// (OriginKey) must be its map key. A pair whose origin has no probe URL is left for live
	// traffic; a due exit (its own breaker) is probed through any probe URL.
	ProbeURLs map[string]string
	// OriginKey must be the transport's (transport.WithOriginKey). Default transport.OriginHost.
	OriginKey transport.OriginFunc
	// Interval is how often the loop asks the pool what is due. Default 5 s.
	Interval time.Duration
	// Concurrency bounds the probes in flight at once. Default 4. Due breakers beyond it wait for
	// a later round.
	Concurrency int
	// Timeout bounds each probe. A timeout of the probe's own is the caller's (neutral) to the
	// transport, so keep it above the transport's header timeout (default 15 s): a hanging exit
	// is then blamed by the transport and its breaker reopens. Default 30 s; negative disables.
	Timeout time.Duration
	// BodyLimit is how much of a probe's body is read before it is closed. Default 4 KiB.
	BodyLimit int64
	// UserAgent is sent with every probe. Default DefaultUserAgent.
	UserAgent string
	// OnProbe, when set, is told of every probe sent. It may be called concurrently and must be
	// quick.
	OnProbe func(ReheatEvent)
}

// ReheatEvent reports one probe of a Reheater.
type ReheatEvent struct {
	Target pool.ProbeTarget
	URL    string // the probe URL (as configured)
	// Status is the response's status, 0 if none arrived.
	Status int
	// Verdict is how the transport judged the probe: Success closes the breaker.
	Verdict pool.Verdict
	// Refused reports that the transport did not send the probe: the slot was taken by another
	// request between the look and the send, or the exit is not ready after all.
	Refused bool
	// Err is the error RoundTrip or the body read returned, nil when the probe completed.
	Err error
}

// Reheater probes due breakers in the background (see the package documentation). Create one
// with StartReheater; stop it by cancelling the context given there or with Close.
type Reheater struct {
	cfg     ReheatConfig
	origins []string // ProbeURLs' keys, sorted
	cancel  context.CancelFunc
	sem     chan struct{}
	wg      sync.WaitGroup
	next    atomic.Uint32 // rotates the probe URL used for exits

	mu       sync.Mutex
	inFlight map[probeKey]bool
}

type probeKey struct {
	scope        pool.Scope
	exit, origin string
}

// StartReheater validates cfg and starts the loop. It runs until ctx is cancelled or Close is
// called.
func StartReheater(ctx context.Context, cfg ReheatConfig) (*Reheater, error) {
	if cfg.Transport == nil {
		return nil, errors.New("probe: ReheatConfig.Transport is nil")
	}
	if len(cfg.ProbeURLs) == 0 {
		return nil, errors.New("probe: ReheatConfig.ProbeURLs is empty: no origin can be probed")
	}
	if cfg.Clock == nil {
		cfg.Clock = cfg.Transport.Pool().Clock()
	}
	if cfg.OriginKey == nil {
		cfg.OriginKey = transport.OriginHost
	}
	switch {
	case cfg.Interval < 0:
		return nil, fmt.Errorf("probe: ReheatConfig.Interval %v: must not be negative", cfg.Interval)
	case cfg.Interval == 0:
		cfg.Interval = DefaultReheatInterval
	}
	switch {
	case cfg.Concurrency < 0:
		return nil, fmt.Errorf("probe: ReheatConfig.Concurrency %d: must not be negative", cfg.Concurrency)
	case cfg.Concurrency == 0:
		cfg.Concurrency = DefaultReheatConcurrency
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultReheatTimeout
	}
	switch {
	case cfg.BodyLimit < 0:
		return nil, fmt.Errorf("probe: ReheatConfig.BodyLimit %d: must not be negative", cfg.BodyLimit)
	case cfg.BodyLimit == 0:
		cfg.BodyLimit = DefaultReheatBodyLimit
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	urls := make(map[string]string, len(cfg.ProbeURLs))
	for origin, raw := range cfg.ProbeURLs {
		t, err := parseTarget(raw, cfg.OriginKey)
		if err != nil {
			return nil, err
		}
		if t.origin != origin {
			return nil, fmt.Errorf("probe: probe URL %q is on origin %q, not %q", t.shown, t.origin, origin)
		}
		urls[origin] = t.raw
	}
	cfg.ProbeURLs = urls
	ctx, cancel := context.WithCancel(ctx)
	r := &Reheater{
		cfg: cfg, origins: sortedKeys(urls), cancel: cancel,
		sem: make(chan struct{}, cfg.Concurrency), inFlight: map[probeKey]bool{},
	}
	r.wg.Add(1)
	go r.loop(ctx)
	return r, nil
}

// Close stops the loop, cancels the probes in flight and waits for every goroutine the Reheater
// started. It is safe to call more than once.
func (r *Reheater) Close() error {
	r.cancel()
	r.wg.Wait()
	return nil
}

func (r *Reheater) loop(ctx context.Context) {
	defer r.wg.Done()
	for {
		t := r.cfg.Clock.NewTimer(r.cfg.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		r.round(ctx)
	}
}

// round starts a probe for each due breaker with a probe URL, no probe of ours already out, and a
// free concurrency slot. It does not wait for them.
func (r *Reheater) round(ctx context.Context) {
	p := r.cfg.Transport.Pool()
	for _, tg := range p.DueProbes(r.cfg.Clock.Now()) {
		if ctx.Err() != nil {
			return
		}
		urls := r.urlsFor(tg)
		if len(urls) == 0 {
			continue // no probe URL for this origin: live traffic will reheat it
		}
		k := keyOf(tg)
		if !r.claim(k) {
			continue
		}
		select {
		case r.sem <- struct{}{}:
		default:
			r.unclaim(k)
			return // every slot busy: the rest stay due for the next round
		}
		r.wg.Add(1) // the loop's own count is held, so this never races with Close's Wait
		go func() {
			defer r.wg.Done()
			defer func() { <-r.sem }()
			defer r.unclaim(k)
			r.probe(ctx, tg, urls)
		}()
	}
}

func keyOf(tg pool.ProbeTarget) probeKey {
	k := probeKey{scope: tg.Scope, origin: tg.Origin}
	if tg.Exit != nil {
		k.exit = tg.Exit.Label()
	}
	return k
}

func (r *Reheater) claim(k probeKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inFlight[k] {
		return false
	}
	r.inFlight[k] = true
	return true
}

func (r *Reheater) unclaim(k probeKey) {
	r.mu.Lock()
	delete(r.inFlight, k)
	r.mu.Unlock()
}

// urlsFor lists the probe URLs to try for tg, in order: the origin's own for a pair or an origin;
// for an exit, every probe URL, starting at a rotating offset so exits spread over origins.
func (r *Reheater) urlsFor(tg pool.ProbeTarget) []string {
	if tg.Scope != pool.ScopeExit {
		if u, ok := r.cfg.ProbeURLs[tg.Origin]; ok {
			return []string{u}
		}
		return nil
	}
	n := len(r.origins)
	off := int(r.next.Add(1)) % n
	urls := make([]string, 0, n)
	for i := range n {
		urls = append(urls, r.cfg.ProbeURLs[r.origins[(off+i)%n]])
	}
	return urls
}

// probe sends tg's probe: pinned to its exit (a pair or an exit), or through any exit (an origin).
// For an exit it moves to the next URL while the transport refuses (that origin's pair is not
// ready for the exit), at most once per URL.
func (r *Reheater) probe(ctx context.Context, tg pool.ProbeTarget, urls []string) {
	for _, u := range urls {
		ev := r.send(ctx, tg, u)
		if r.cfg.OnProbe != nil {
			r.cfg.OnProbe(ev)
		}
		if !ev.Refused || tg.Scope != pool.ScopeExit || ctx.Err() != nil {
			return
		}
	}
}

func (r *Reheater) send(ctx context.Context, tg pool.ProbeTarget, u string) ReheatEvent {
	ev := ReheatEvent{Target: tg, URL: u}
	if r.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.cfg.Timeout)
		defer cancel()
	}
	if tg.Exit != nil {
		ctx = transport.ContextWithExit(ctx, tg.Exit.Label())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		ev.Err = err
		return ev
	}
	req.Header.Set("User-Agent", r.cfg.UserAgent)
	resp, err := r.cfg.Transport.RoundTrip(req)
	if err != nil {
		ev.Err = err
		var ae *transport.AttemptError
		switch {
		case errors.As(err, &ae):
			ev.Verdict = ae.Verdict
		case errors.Is(err, pool.ErrNoHealthyExit), errors.Is(err, pool.ErrOriginUnhealthy), errors.Is(err, pool.ErrThrottled):
			ev.Refused = true
			ev.Verdict = pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassNotAttempted}
		}
		return ev
	}
	ev.Status = resp.StatusCode
	ev.Verdict, _ = transport.VerdictFromResponse(resp)
	// The transport confirms a success when the body ends: read a little, then close (closing
	// early counts as success).
	_, rerr := io.Copy(io.Discard, io.LimitReader(resp.Body, r.cfg.BodyLimit))
	resp.Body.Close()
	if rerr != nil && ev.Verdict.Outcome == pool.Success {
		ev.Err = rerr
		ev.Verdict = pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBodyRead, ConnLevel: true}
		if ctx.Err() != nil {
			ev.Verdict = pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled}
		}
	}
	return ev
}

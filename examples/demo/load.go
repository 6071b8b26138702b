package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// clientTimeout bounds each request as a caller would; the transport's header timeout is shorter,
// so a hanging exit is blamed before the caller gives up.
const clientTimeout = 5 * time.Second

// pacing is the share of -duration the requests are spread over, leaving time for the stragglers.
const pacing = 0.85

// pagePath is what each origin is asked for.
var pagePath = map[string]string{"shop": "/item/%d", "news": "/story/%d", "api": "/v1/price/%d"}

// loadStats is what the callers saw. The counters are read live by the display.
type loadStats struct {
	sent, ok, failed, refused atomic.Int64

	mu            sync.Mutex
	refusedNoExit int
	refusedOrigin int
	failures      map[pool.Class]int
	examples      map[string]string // the first thing a caller saw, by class or refusal kind
	checked       int               // successes whose connection was checked against the exit named
	misrouted     int               // ... whose connection led to another proxy than that exit's
}

func newLoadStats() *loadStats {
	return &loadStats{failures: map[pool.Class]int{}, examples: map[string]string{}}
}

// run sends cfg.Requests requests, paced evenly over most of cfg.Duration and spread at
// random across the origins, from cfg.Workers workers. It stops sending when all are sent, when
// cfg.Duration is up or when ctx ends, and returns once every request has finished.
func (st *loadStats) run(ctx context.Context, cfg config, w *scene, tr http.RoundTripper, rec *recorder, seed uint64) {
	jobs := make(chan string)
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Go(func() {
			client := &http.Client{Transport: tr, Timeout: clientTimeout}
			for u := range jobs {
				st.do(ctx, client, rec, w.ProxyAt, u)
			}
		})
	}

	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	interval := time.Duration(float64(cfg.Duration) * pacing / float64(cfg.Requests))
	deadline := time.NewTimer(cfg.Duration)
	defer deadline.Stop()
	start := time.Now()
send:
	for i := range cfg.Requests {
		o := w.origins[rng.IntN(len(w.origins))]
		u := o.URL + fmt.Sprintf(pagePath[o.Name], i)
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-deadline.C:
				t.Stop()
				break send
			case <-ctx.Done():
				t.Stop()
				break send
			}
		}
		select {
		case jobs <- u:
			st.sent.Add(1)
		case <-deadline.C:
			break send
		case <-ctx.Done():
			break send
		}
	}
	close(jobs)
	wg.Wait()
}

// do sends one request and files its outcome: success is a 2xx whose body was read to the end.
// proxyAt names the proxy at an address, to check which one the response's connection led to.
func (st *loadStats) do(ctx context.Context, client *http.Client, rec *recorder, proxyAt func(addr string) string, u string) {
	r := &reqRecord{}
	var (
		mu   sync.Mutex
		conn string // the address the connection that carried the request leads to: a proxy's
	)
	trace := &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
		mu.Lock()
		conn = ci.Conn.RemoteAddr().String()
		mu.Unlock()
	}}
	ctx = httptrace.WithClientTrace(context.WithValue(ctx, reqKey{}, r), trace)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		st.fail(pool.ClassError, err.Error())
		return
	}
	resp, err := client.Do(req)
	if err != nil {
		switch {
		case errors.Is(err, pool.ErrNoHealthyExit):
			st.refuse(&st.refusedNoExit, "no healthy exit", err)
		case errors.Is(err, pool.ErrOriginUnhealthy):
			st.refuse(&st.refusedOrigin, "origin unhealthy", err)
		default:
			st.fail(classOf(rec, r), "err: "+err.Error())
		}
		return
	}
	_, readErr := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if readErr == nil && resp.StatusCode/100 == 2 {
		mu.Lock()
		via := proxyAt(conn)
		mu.Unlock()
		st.succeed(resp, via)
		return
	}
	what := fmt.Sprintf("a %s response (err == nil)", resp.Status)
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		what = fmt.Sprintf("a %s response with Retry-After: %s (err == nil)", resp.Status, ra)
	}
	if readErr != nil {
		what = "the body failed mid-read: " + readErr.Error()
	}
	st.fail(classOf(rec, r), what)
}

// classOf is the verdict class the transport gave the request's attempt.
func classOf(rec *recorder, r *reqRecord) pool.Class {
	if v, ok := rec.verdict(r); ok {
		return v.Class
	}
	return pool.ClassError
}

// succeed counts a success that arrived on a connection to the proxy named via.
func (st *loadStats) succeed(resp *http.Response, via string) {
	st.ok.Add(1)
	carried := ""
	if e := transport.ExitFromResponse(resp); e != nil {
		carried = e.Label()
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.checked++
	if via != carried {
		st.misrouted++
	}
}

func (st *loadStats) fail(c pool.Class, what string) {
	st.failed.Add(1)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.failures[c]++
	if _, ok := st.examples[string(c)]; !ok {
		st.examples[string(c)] = what
	}
}

func (st *loadStats) refuse(n *int, kind string, err error) {
	st.refused.Add(1)
	st.mu.Lock()
	defer st.mu.Unlock()
	*n++
	if _, ok := st.examples[kind]; !ok {
		st.examples[kind] = "err: " + err.Error()
	}
}

package transport_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// TestTierBudgetThroughProxies: a cheap tier-0 proxy with a byte budget of 30,000 bytes an hour
// and a dear tier-1 proxy. Requests go through the cheap one until its budget is spent — what the
// cheap proxy counted on its sockets ends within one attempt of the budget — then through the
// dear one; a request whose Want only the cheap exit matches then fails with a
// *pool.BudgetSpentError. Every attempt's spend is its bytes × its exit's price, per attempt and
// per exit.
func TestTierBudgetThroughProxies(t *testing.T) {
	const (
		budget  = 30_000
		size    = 2_000
		cheapGB = 2.5  // per GB
		dearGB  = 12.0 // per GB
		dearReq = 0.001
	)
	origin := trafficOrigin(t, false, false)
	var px [2]*proxytest.Proxy
	for i, name := range []string{"cheap", "dear"} {
		p, err := proxytest.Start(proxytest.Config{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		px[i] = p
	}
	cheap := integExit(t, px[0].URL(), "cheap").WithAttr("country", "us").WithCost(pool.Cost{PerGB: cheapGB})
	dear := integExit(t, px[1].URL(), "dear").WithTier(1).WithCost(pool.Cost{PerGB: dearGB, PerRequest: dearReq})
	obs := &integObserver{}
	tr, c := integNew(t, nil, pool.WithExits(cheap, dear), pool.WithClock(newIntegClock()),
		pool.WithTierBudget(0, pool.Budget{Bytes: budget, Period: time.Hour}), transport.WithObserver(obs))

	var maxCheap int64 // the largest attempt through the cheap exit
	dearFrom := -1
	for i := range 40 {
		trafficDo(t, c, http.MethodGet, origin.URL+"/size/"+strconv.Itoa(size), nil, 1)
		r := obs.last(t)
		if r.Exit.Label() == "cheap" {
			if dearFrom >= 0 {
				t.Fatalf("attempt %d went through cheap after attempt %d went through dear", i, dearFrom)
			}
			maxCheap = max(maxCheap, r.Bytes.Sent+r.Bytes.Received)
		} else if dearFrom < 0 {
			dearFrom = i
		}
		price, perReq := cheapGB, 0.0
		if r.Exit.Label() == "dear" {
			price, perReq = dearGB, dearReq
		}
		if want := float64(r.Bytes.Sent+r.Bytes.Received)*price/1e9 + perReq; math.Abs(r.Spend-want) > 1e-9 {
			t.Errorf("attempt %d: AttemptResult.Spend = %v, want %v (bytes %+v × %v + %v)", i, r.Spend, want, r.Bytes, price, perReq)
		}
	}
	if dearFrom < 0 {
		t.Fatalf("every attempt went through cheap: its budget of %d bytes never stopped it", budget)
	}
	cheapBytes := px[0].BytesFromClients() + px[0].BytesToClients()
	t.Logf("the cheap proxy carried %d bytes in %d attempts (at most %d each); then the dear one served", cheapBytes, dearFrom, maxCheap)
	if cheapBytes < budget || cheapBytes > budget+maxCheap {
		t.Errorf("the cheap proxy carried %d bytes, want from the budget %d to one attempt (%d) more", cheapBytes, budget, maxCheap)
	}

	_, err := c.Do(mustRequest(t, transport.ContextWithWant(context.Background(), pool.MustParseWant("country=us")), origin.URL+"/size/10"))
	var be *pool.BudgetSpentError
	if !errors.As(err, &be) || be.Tier != 0 || !errors.Is(err, pool.ErrBudgetSpent) {
		t.Errorf("a request only the cheap exit matches: err = %v, want a *pool.BudgetSpentError for tier 0", err)
	}

	s := tr.Pool().Snapshot()
	for _, e := range s.Exits {
		price, perReq, n := cheapGB, 0.0, float64(dearFrom)
		if e.Exit == "dear" {
			price, perReq, n = dearGB, dearReq, float64(40-dearFrom)
		}
		want := float64(e.Bytes.Sent+e.Bytes.Received)*price/1e9 + perReq*n
		if math.Abs(e.Spend-want) > 1e-9*n {
			t.Errorf("exit %s: Spend = %v, want %v (bytes %+v × %v + %v × %v)", e.Exit, e.Spend, want, e.Bytes, price, perReq, n)
		}
	}
}

// mustRequest is a GET of u in ctx.
func mustRequest(t *testing.T, ctx context.Context, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

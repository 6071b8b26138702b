package probe_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/probe"
)

// The pre-dispatch check: probe a target through every exit, then branch on the verdict.
func Example() {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	defer origin.Close()
	proxy, err := proxytest.Start(proxytest.Config{})
	if err != nil {
		panic(err)
	}
	defer proxy.Close()
	exits, err := pool.ReadExits(strings.NewReader(
		proxy.Addr() + " label=dc-1\n" +
			"127.0.0.1:1 label=dc-2\n")) // nothing listens on port 1: refused
	if err != nil {
		panic(err)
	}

	p, err := probe.New(probe.Config{Exits: exits, Targets: []string{origin.URL + "/robots.txt"}})
	if err != nil {
		panic(err)
	}
	rep := p.Run(context.Background())
	for _, r := range rep.Results {
		fmt.Println(r.Exit, r.Outcome, r.Class)
	}
	fmt.Println(rep.Verdict, rep.Overall.SuccessRate, rep.Recommendation.Backoff.Initial, rep.Recommendation.ConcurrencyFactor)
	// Output:
	// dc-1 success ok
	// dc-2 permanent proxy_refused
	// DEGRADED 0.5 2s 0.5
}

// The seed article's example: one 200, one 429, one 200 after a second.
func ExampleAssess() {
	results := []probe.Result{
		{Status: 200, LatencyMS: 120, Outcome: pool.Success, Class: pool.ClassOK},
		{Status: 429, LatencyMS: 180, Outcome: pool.Transient, Class: pool.ClassRateLimited},
		{Status: 200, LatencyMS: 1030, Outcome: pool.Success, Class: pool.ClassOK},
	}
	a := probe.Summarize(results, probe.Policy{}).Assessment
	b := a.Recommendation.Backoff
	fmt.Println(a.Verdict, b.Initial, b.Cap, b.MaxRetries, a.Recommendation.ConcurrencyFactor)
	for _, r := range a.Reasons {
		fmt.Println(r)
	}
	// Output:
	// CRITICAL 5s 1m0s 5 0.33
	// throttled: 1 of 3 probes answered 429 (33.3% above 0.0%)
	// success rate 0.67 below 0.90 (failures: rate_limited 1)
}

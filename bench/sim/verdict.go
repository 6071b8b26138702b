package sim

import (
	"fmt"

	"github.com/proxybreaker/proxybreaker/pool"
)

// Verdict is the verdict ours reports for an attempt whose result was r: the one
// transport.DefaultClassifier gives the response or error a real exit would have produced
// (TestVerdictMatchesClassifier builds those and checks), so that driving the pool directly
// judges every outcome as the Transport over a real network would:
//
//	result                                    as the network gives it                        verdict
//	200                                       200 OK                                         success, ok
//	403 (a ban)                               Cloudflare challenge: cf-mitigated: challenge  transient, blocked (detector cloudflare)
//	407 (auth failing)                        407 from the proxy                             permanent, exit scope, proxy_auth
//	429 (over the pair's cap)                 429 with Retry-After in whole seconds          transient, rate_limited, RetryAfter
//	ErrTimeout (a flaky exit)                 no response headers in time                    transient, timeout, connection-level
//	ErrRefused (a dead exit)                  the dial to the proxy refused                  permanent, exit scope, proxy_refused
//
// The ground truth answers nothing else; Verdict panics on another status, so that a new answer
// cannot go unjudged.
func Verdict(r Result) pool.Verdict {
	switch r.Err {
	case ErrTimeout:
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true}
	case ErrRefused:
		return pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyRefused}
	}
	switch s := r.Status; {
	case s == 407:
		return pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}
	case s == 403:
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, Detector: "cloudflare"}
	case s == 429:
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: r.RetryAfter}
	case s == 200:
		return pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}
	}
	panic(fmt.Sprintf("sim: no verdict for %+v", r))
}

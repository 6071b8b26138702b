// Package sim plays a pool of proxy exits against a seeded ground truth on a virtual clock, and
// compares routing strategies by what they get done.
//
//	worker → Truth.Draw (the workload) → Router.Route → picks an exit → Env.Send → Truth decides the
//	       answer and its latency → the worker is busy for that simulated latency
//	       → (ours: Lease.ReportAt(Verdict)) → next event
//
// Ours drives a pool.Pool through its public API, with no HTTP in between: Pool.PickAt on the
// simulation's clock, then Lease.ReportAt with the verdict transport.DefaultClassifier gives the
// response or error a real exit would have produced for the answer (Verdict builds it and asks
// the classifier). The peers choose exits by their own rules.
//
// The spend world (SpendWorld, spend.go) prices the exits per GB in two tiers, a cheap datacenter
// tier and a premium residential one, and counts what each strategy's attempts cost (Metrics.Spend)
// from their answers, their origins' page sizes and their exits' tiers; ours meets the tiers as
// pool.Exit tiers, and CrawleeTiered is the peer that knows tiers too.
//
// The gateway world (GatewayWorld, gateway.go) is a provider's pool of IPs behind one gateway: a
// Provider maps each username to an IP as a gateway does (a session sticks to its IP until its
// TTL, a username without one draws per request), origins ban IPs, subnet-mates with them, and
// the strategies are the pool used as users do today (GatewayLines: N static session lines) or
// with its gateway support (GatewaySessions: one {session} line); recovery there is measured per
// line (a session slot), from the ban met to the line's next page.
//
// A world with Scenario.Crawl set is a finite crawl (crawl.go, issue 35): each site has a quota
// of pages, a worker takes a page of a site drawn among those with pages left, and the run ends
// when every site is done (Metrics.Crawl: the makespan, each site's completion, idle worker time),
// or at the world's Duration unfinished. CrawlOf makes one of any world; crawlworlds.go sizes the
// bench's. The crawl-limits world (blocklimit.go) has limiters whose block outlasts their period.
// From the bench directory, one world and seed, ours against the oracles:
//
//	go run ./cmd/benchall -only crawl -worlds round-1 -seeds 1 -strategies ours
//
// No sleeps: a discrete-event loop advances a clock.Fake to the earliest worker event and lets
// exactly one worker goroutine run at a time, so a run is deterministic for its seed, and runs of
// different worlds or strategies may go in parallel (RunAll).
package sim

// Package redisstore shares a pool's breaker state across a fleet of processes through Redis
// (github.com/redis/go-redis/v9): a trip anywhere opens the pair, or parks the exit, on every
// member within milliseconds; a successful probe anywhere closes it everywhere; the fleet sends
// one HALF_OPEN probe per key, not one per member; and an exit's rate limit can be the fleet's
// budget rather than each process's.
//
//	request path (never a round trip, but a probe's claim):
//	  transport.Transport → pool.Pick → breakers (the local mirror) → exit bucket (leased tokens)
//	                      → HALF_OPEN probe? ClaimProbe: one SET NX PX, ≤ ClaimTimeout
//	                      → verdict → transition → (*Store).StateChanged: enqueue
//	store goroutines:
//	  publish loop:  queue → script: keep the newer entry, index it, PUBLISH       → Redis
//	  sync loop:     SUBSCRIBE → other members' entries → Pool.Apply                ← Redis
//	                 PING every HealthInterval; on any failure: degraded, then
//	                 re-subscribe and re-sync (push local state, pull every live key)
//	  lease loop:    exits short of tokens → GCRA lease of a batch (pipelined)      ↔ Redis
//
// Its import path is …/store/redis; the package is named redisstore so that it never shadows
// go-redis's package redis, which callers import beside it to make the client.
//
// # The local mirror
//
// Each member's pool is its own copy of the fleet's state: requests read only their own breakers,
// as without a store. Entries are applied with Pool.Apply, so of two entries for a key the one
// with the later Changed wins everywhere (members' clocks are assumed to agree to well within a
// breaker window, as NTP gives). An entry is stored under a key that expires Linger after its
// OPEN window ends, so Redis holds only what a member starting or reconnecting needs.
//
// # Keys
//
// Every key of a namespace starts with the hash tag {pb:NAMESPACE}: in Redis Cluster they share
// one slot, so the scripts that touch several at once are legal and MGET is single-node. Under it:
// :b:SCOPE:EXIT:ORIGIN (an entry), :idx (a sorted set of live entries, by expiry), :claim:… (a
// probe claim), :rl:EXIT (a fleet bucket's GCRA state), and the channel :events. Exit labels and
// origins are query-escaped, so no part holds a colon or a brace.
//
// # Outage
//
// When Redis cannot be reached — a failed publish, lease or claim, a subscription that drops or
// stops answering PING — the store turns degraded: requests go on, on local state; transitions
// are kept; claims are granted locally (one probe per member); exit buckets fall back to local
// buckets of FallbackShare × the budget. Health reports it, OnHealth is called, and a warning is
// logged. Every HealthInterval the sync loop tries again; once it has re-subscribed, pushed what
// this member learned meanwhile and pulled what the others did, the store is healthy again.
// No request fails, or waits on Redis, because of an outage: the longest a request can wait is a
// probe's ClaimTimeout (50 ms) or a late lease's LeaseWait (50 ms), once, as the outage begins.
package redisstore

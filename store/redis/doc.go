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
//	  publish loop:  queue → script: keep the newer entry, index it, (S)PUBLISH    → Redis
//	  sync loops:    one per subscription (per shard on a cluster):
//	                 (S)SUBSCRIBE → other members' entries → Pool.Apply             ← Redis
//	                 PING every HealthInterval; on a failure on its shards: degraded,
//	                 then re-subscribe and re-sync (pull live entries by pages, push
//	                 what this member wrote and Redis may lack)
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
// A namespace's keys are spread over Shards (16) hash tags, {pb:NAMESPACE:S.N}, placed on equal
// ranges of the Redis Cluster slots: an exit's keys are in the shard of its label's hash, an
// origin guard's in its origin's, so no script needs keys of two shards and a cluster's masters
// share the keys, the scripts and the pub/sub traffic. Under a shard's tag: :b:SCOPE:EXIT:ORIGIN
// (an entry), :idx (a sorted set of the shard's live entries, by expiry), :claim:… (a probe
// claim), :rl:EXIT (a fleet bucket's GCRA state), :run (the shard's run id) and the channel
// :events (SPUBLISH/SSUBSCRIBE on a cluster, PUBLISH/SUBSCRIBE on one server). Exit labels and
// origins are query-escaped, so no part holds a colon or a brace. A namespace written by the
// one-slot layout of earlier versions is refused (ErrLegacyLayout). The layout, the migration and
// the memory each key takes are in docs/fleet.md.
//
// # Outage
//
// When Redis cannot be reached — a failed publish, lease or claim, a subscription that drops or
// stops answering PING — the store turns degraded: requests go on, on local state; transitions
// are kept; claims are granted locally (one probe per member); exit buckets fall back to local
// buckets of FallbackShare × the budget. Health reports it, OnHealth is called, and a warning is
// logged. Every HealthInterval the sync loop of each shard out of step tries again; once it has
// re-subscribed, pulled what the others wrote and pushed what this member wrote that Redis may lack
// (never what it learned from others), the shard is in step; once every shard is, the store is
// healthy again.
// No request fails, or waits on Redis, because of an outage: the longest a request can wait is a
// probe's ClaimTimeout (50 ms) or a late lease's LeaseWait (50 ms), once, as the outage begins.
package redisstore

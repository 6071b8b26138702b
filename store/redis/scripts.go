package redisstore

import goredis "github.com/redis/go-redis/v9"

// The Lua scripts. Each touches only keys of one shard of one namespace, passed in KEYS, so all
// in one hash slot, and publishes only on that shard's channel. Instants that Redis compares
// across members come from Redis's own clock (TIME), never a member's.

// publishScript stores an entry unless the one there is as new (the same entry, sent again, or a
// newer one), indexes it until it expires, releases the member's probe claim when asked, and
// publishes it: by SPUBLISH on a Redis Cluster (sharded pub/sub: only the shard's master and its
// replicas carry it), by PUBLISH otherwise.
//
//	KEYS: state key, index, claim key
//	ARGV: entry, ttl (ms), channel, member, "1" to release the member's claim, "s" for SPUBLISH
//	returns 1 if stored and published, 0 if the stored entry is as new
var publishScript = goredis.NewScript(`
local old = redis.call('GET', KEYS[1])
if old and string.sub(old, 1, 20) >= string.sub(ARGV[1], 1, 20) then
  return 0
end
local ttl = tonumber(ARGV[2])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%.0f', now))
redis.call('ZADD', KEYS[2], string.format('%.0f', now + ttl), KEYS[1])
local pttl = redis.call('PTTL', KEYS[2])
if pttl >= 0 and pttl < ttl then
  redis.call('PEXPIRE', KEYS[2], ttl)
elseif pttl == -1 then
  redis.call('PEXPIRE', KEYS[2], ttl)
end
if ARGV[5] == '1' and redis.call('GET', KEYS[3]) == ARGV[4] then
  redis.call('DEL', KEYS[3])
end
if ARGV[6] == 's' then
  redis.call('SPUBLISH', ARGV[3], ARGV[1])
else
  redis.call('PUBLISH', ARGV[3], ARGV[1])
end
return 1
`)

// pageScript reads one page of a shard's live entries. On the first page (cursor "0") it drops
// expired entries from the index. It also returns the shard's run id, setting it to ARGV[3] if
// the shard has none, and makes it live ARGV[4] ms more: a run id that changed since a member last looked means Redis lost the
// shard's keys (a server restarted empty), and the member pushes again what it wrote there.
//
//	KEYS: index, run key
//	ARGV: cursor, count (0: the run id alone), a new run id, the run id's lifetime (ms)
//	returns {run id, next cursor ("0" after the last page), state key, state key, …}
var pageScript = goredis.NewScript(`
local run = redis.call('GET', KEYS[2])
if not run then
  run = ARGV[3]
end
redis.call('SET', KEYS[2], run, 'PX', ARGV[4])
local out = {run, '0'}
if ARGV[2] == '0' then
  return out
end
if ARGV[1] == '0' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now))
end
local r = redis.call('ZSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
out[2] = r[1]
for i = 1, #r[2], 2 do
  out[#out + 1] = r[2][i]
end
return out
`)

// claimScript claims a probe slot for a member for a lease, unless another member holds it.
// The holder may claim again (its next probe, or a renewal).
//
//	KEYS: claim key
//	ARGV: member, lease (ms)
//	returns {1, 0} when claimed, {0, remaining ms} when another member holds it
var claimScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if (not cur) or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, 0}
end
return {0, redis.call('PTTL', KEYS[1])}
`)

// leaseScript is GCRA over one exit's fleet budget: it grants up to "want" tokens at once, never
// more than the bucket holds, so that over any span T the fleet takes at most burst + T/emission.
// The theoretical arrival time (tat) is in microseconds of Redis's clock.
//
//	KEYS: rate key
//	ARGV: emission interval (µs), burst, want
//	returns {granted, µs until the bucket has a token again: 0 if it still has one}
var leaseScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local em = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local avail = math.floor((now + burst * em - tat) / em)
if avail > want then avail = want end
if avail < 1 then
  return {0, tat + em - burst * em - now}
end
tat = tat + avail * em
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
if now + burst * em - tat >= em then
  return {avail, 0}
end
return {avail, tat + em - burst * em - now}
`)

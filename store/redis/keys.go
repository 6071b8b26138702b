package redisstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/store"
)

// namespaceRE is what a Settings.Namespace may hold: nothing that could close the hash tag or
// split a key.
var namespaceRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Shards is how many hash tags a namespace's keys are spread over. Every key of an exit (its pair
// and exit entries, their probe claims, its fleet bucket) and of an origin (its origin guard's
// entry and claim) lives under the tag of one shard, with the shard's index of live entries, its
// run id and its events channel; no script needs keys of two shards. Shard S's tag is
// "{pb:NAMESPACE:S.N}" with the least N that puts it in the S-th of Shards equal ranges of the
// 16384 Redis Cluster slots, so a cluster whose masters serve equal ranges (as redis-cli --cluster
// create assigns them) gets an equal share of the shards on each master — and of the keys, exits
// being spread over the shards by a hash of their labels. Every member of a fleet must use the
// same value: it is part of the key layout (docs/fleet.md).
const Shards = 16

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// keys are the Redis key names of one namespace (see Shards).
type keys struct {
	ns     string
	shards [Shards]shardKeys
}

// shardKeys are the names of one shard's keys.
type shardKeys struct {
	tag     string // {pb:NAMESPACE:S.N}
	index   string // sorted set: state key → expiry (Unix ms, Redis's clock)
	channel string // pub/sub channel the shard's transitions are published on
	run     string // a random id set by the first member to find it missing: changes when Redis lost the shard
}

func newKeys(namespace string) keys {
	k := keys{ns: namespace}
	for s := range k.shards {
		lo, hi := s*clusterSlots/Shards, (s+1)*clusterSlots/Shards
		var tag string
		for n := 0; ; n++ {
			tag = "pb:" + namespace + ":" + strconv.Itoa(s) + "." + strconv.Itoa(n)
			if slot := int(crc16(tag)) % clusterSlots; slot >= lo && slot < hi {
				break
			}
		}
		tag = "{" + tag + "}"
		k.shards[s] = shardKeys{tag: tag, index: tag + ":idx", channel: tag + ":events", run: tag + ":run"}
	}
	return k
}

// crc16 is CRC-16/XMODEM, the hash Redis Cluster maps keys to slots with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// legacyIndex is the index key of the one-slot layout (before shards): a namespace that holds it
// was written by members of an older version (see ErrLegacyLayout).
func (k keys) legacyIndex() string { return "{pb:" + k.ns + "}:idx" }

// shardOf is the shard of k's keys: its exit's, or for an origin guard its origin's.
func shardOf(k store.Key) int {
	if k.Exit != "" {
		return shardOfName(k.Exit)
	}
	return shardOfName(k.Origin)
}

// shardOfName hashes an exit label or an origin to a shard (FNV-1a).
func shardOfName(name string) int {
	h := uint32(2166136261)
	for i := 0; i < len(name); i++ {
		h ^= uint32(name[i])
		h *= 16777619
	}
	return int(h % Shards)
}

// id is a breaker's key within the namespace: scope, exit label and origin, each escaped so that
// no part can contain a colon or a brace.
func id(k store.Key) string {
	return k.Scope.String() + ":" + url.QueryEscape(k.Exit) + ":" + url.QueryEscape(k.Origin)
}

// keyOfTarget is the store key of a probe target.
func keyOfTarget(t pool.ProbeTarget) store.Key {
	k := store.Key{Scope: t.Scope, Origin: t.Origin}
	if t.Exit != nil {
		k.Exit = t.Exit.Label()
	}
	return k
}

func (k keys) state(s int, breakerID string) string { return k.shards[s].tag + ":b:" + breakerID }
func (k keys) claim(s int, breakerID string) string { return k.shards[s].tag + ":claim:" + breakerID }
func (k keys) rate(exit string) string {
	return k.shards[shardOfName(exit)].tag + ":rl:" + url.QueryEscape(exit)
}

// StateKey returns the Redis key that holds the entry for k in namespace: for operators looking
// at a fleet's keys, and tests.
func StateKey(namespace string, k store.Key) string {
	return newKeys(namespace).state(shardOf(k), id(k))
}

// changedDigits is the width of the Changed prefix of an entry: Unix nanoseconds, zero-padded, so
// that the scripts compare two entries' instants as strings.
const changedDigits = 20

// entry is what a state key holds and what is published: the member that wrote it and the saved
// breaker.
type entry struct {
	Member string `json:"m"`
	pool.SavedBreaker
}

// encode returns "CHANGED|JSON": the Changed instant as changedDigits digits, then the entry.
func encode(member string, sb pool.SavedBreaker) (string, error) {
	data, err := json.Marshal(entry{Member: member, SavedBreaker: sb})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%0*d|%s", changedDigits, changedNanos(sb.Changed), data), nil
}

func changedNanos(t time.Time) int64 {
	if t.IsZero() || t.UnixNano() < 0 {
		return 0
	}
	return t.UnixNano()
}

// decode parses what encode wrote. Everything that arrives from Redis goes through it, so it
// checks every field a pool would act on.
func decode(s string) (entry, error) {
	if len(s) < changedDigits+1 || s[changedDigits] != '|' {
		return entry{}, errors.New("redisstore: entry: want CHANGED|JSON")
	}
	changed, err := strconv.ParseInt(s[:changedDigits], 10, 64)
	if err != nil || changed < 0 {
		return entry{}, fmt.Errorf("redisstore: entry: bad changed prefix %q", s[:changedDigits])
	}
	var e entry
	if err := json.Unmarshal([]byte(s[changedDigits+1:]), &e); err != nil {
		return entry{}, fmt.Errorf("redisstore: entry: %w", err)
	}
	sb := e.SavedBreaker
	switch {
	case e.Member == "":
		return entry{}, errors.New("redisstore: entry: no member")
	case changedNanos(sb.Changed) != changed:
		return entry{}, fmt.Errorf("redisstore: entry: changed prefix %d disagrees with %v", changed, sb.Changed)
	case sb.State != breaker.Closed && sb.State != breaker.Open:
		return entry{}, fmt.Errorf("redisstore: entry: state %v", sb.State)
	case sb.Scope > pool.ScopeOrigin:
		return entry{}, fmt.Errorf("redisstore: entry: scope %d", sb.Scope)
	case (sb.Scope == pool.ScopePair || sb.Scope == pool.ScopeExit) && sb.Exit == "":
		return entry{}, fmt.Errorf("redisstore: entry: %v without an exit", sb.Scope)
	case (sb.Scope == pool.ScopePair || sb.Scope == pool.ScopeOrigin) && sb.Origin == "":
		return entry{}, fmt.Errorf("redisstore: entry: %v without an origin", sb.Scope)
	case sb.Level < 0 || sb.Level > 64:
		return entry{}, fmt.Errorf("redisstore: entry: level %d", sb.Level)
	}
	return e, nil
}

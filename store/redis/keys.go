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

// keys are the Redis key names of one namespace. Every one starts with the hash tag
// "{pb:NAMESPACE}", so in Redis Cluster they all live in one slot: the scripts that touch several
// of them at once are legal there, and MGET of state keys is a single-node command.
type keys struct {
	tag     string // {pb:NAMESPACE}
	index   string // sorted set: state key → expiry (Unix ms, Redis's clock)
	channel string // pub/sub channel the transitions are published on
}

func newKeys(namespace string) keys {
	tag := "{pb:" + namespace + "}"
	return keys{tag: tag, index: tag + ":idx", channel: tag + ":events"}
}

// id is a breaker's key within the namespace: scope, exit label and origin, each escaped so that
// no part can contain a colon or a brace.
func id(k store.Key) string {
	return k.Scope.String() + ":" + url.QueryEscape(k.Exit) + ":" + url.QueryEscape(k.Origin)
}

// targetID is id for a probe target.
func targetID(t pool.ProbeTarget) string {
	k := store.Key{Scope: t.Scope, Origin: t.Origin}
	if t.Exit != nil {
		k.Exit = t.Exit.Label()
	}
	return id(k)
}

func (k keys) state(breakerID string) string { return k.tag + ":b:" + breakerID }
func (k keys) claim(breakerID string) string { return k.tag + ":claim:" + breakerID }
func (k keys) rate(exit string) string       { return k.tag + ":rl:" + url.QueryEscape(exit) }

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

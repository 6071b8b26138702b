package pool

import (
	"fmt"
	"net/url"
	"strings"
)

// Direct exits. A direct exit is no proxy at all: requests through it leave from this machine's
// own address. It is an exit like any other to the pool — breakers per (exit, origin), a tier, a
// weight, attributes, Want, sessions, rate limits, snapshots and saved state — so a crawl can start
// without proxies, direct in tier 0, and move an origin to the proxies of a higher tier only once
// that origin blocks the direct exit: the pick takes the lowest tier with a ready exit for the
// origin, and a block opens only the (direct, origin) pair.
//
// Only an exit the user made direct sends directly: DirectExit in code, the word "direct" in a
// proxy list (ReadExits, ParseExit). A pick that finds no ready exit is still refused, never sent
// directly. A direct exit's ProxyURL is nil; package transport dials it with no proxy.

// SchemeDirect is the Scheme of a direct exit: no proxy.
const SchemeDirect = "direct"

// DirectLabel is a direct exit's label unless WithLabel chose another.
const DirectLabel = "direct"

// DirectExit returns a new direct exit: no proxy, labelled "direct", tier 0, weight 1. Give each
// direct exit of one pool its own label (WithLabel): labels name exits.
func DirectExit() *Exit {
	return &Exit{u: &url.URL{Scheme: SchemeDirect}, label: DirectLabel, weight: 1}
}

// Direct reports whether e is a direct exit (DirectExit): one that dials origins itself, with no
// proxy.
func (e *Exit) Direct() bool { return e.u.Scheme == SchemeDirect }

// isDirectWord reports whether s, trimmed, is the word a proxy list writes a direct exit with:
// "direct", in any case (PAC files write DIRECT).
func isDirectWord(s string) bool { return strings.EqualFold(s, SchemeDirect) }

// checkNotDirectURL refuses a URL that tries to name a direct exit (direct://…): a direct exit has
// no address, so it is the word alone. name is the redacted input, for the error.
func checkNotDirectURL(u *url.URL, name string) error {
	if strings.EqualFold(u.Scheme, SchemeDirect) {
		return fmt.Errorf("pool: proxy %q: a direct exit is the word %q alone, with no address or credentials (pool.DirectExit in code)", name, SchemeDirect)
	}
	return nil
}

package pool

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// OriginSettings are the settings of the origins a WithOriginSettings pattern matches. Each field
// is layered over what the origin would have without the pattern: a zero field keeps it. The zero
// OriginSettings changes nothing.
type OriginSettings struct {
	// Pair tunes the (exit, origin) breakers of matching origins: each non-zero field replaces the
	// pool's (WithPairSettings) and the exit's own (Exit.WithPairSettings). For a site with
	// 15-minute rate windows, say, BaseCooldown: 15 * time.Minute stops probes during the ban.
	// A zero field cannot restore a default the pool's settings changed (FailureRatio back to 0).
	Pair breaker.Settings
	// Guard tunes the origin guard of matching origins: each non-zero field replaces the pool's
	// (WithOriginGuard). Guard.Window is also the window SuspectEvidence looks back over.
	Guard OriginGuardSettings
	// Suspect is what a Suspect answer from a matching origin (a plain 403) means. The zero value
	// keeps what a less specific pattern said, else SuspectEvidence.
	Suspect SuspectPolicy
}

// WithOriginSettings gives the origins matching pattern settings of their own. A pattern is one
// of (case-insensitive):
//
//	shop.example        that host, on any port (the key "shop.example" or "shop.example:8443")
//	shop.example:8443   that host on that port only
//	*.shop.example      every subdomain of shop.example, at any depth, on any port (not shop.example itself)
//	*                   every origin
//
// Origin keys are host[:port] strings (transport.OriginFunc's, or whatever the caller passes as
// Request.Origin): a key that is not host[:port] matches only "*" and an identical exact pattern.
// When several patterns match an origin, they apply from the least specific to the most — "*",
// then shorter suffixes before longer ones, then the host, then host:port — each non-zero field
// replacing the last: a pattern for "*.shop.example" can set the 403 policy while one for
// "api.shop.example" sets only a cooldown, and api.shop.example gets both.
//
// New validates every pattern and the settings each origin can end up with, and names the
// pattern that is wrong: a '*' anywhere but alone or as the first label, a scheme or a path, a
// pattern given twice, settings breaker.NewPolicy or the guard refuses. An origin's settings are
// looked up once, when the pool first sees the origin, and kept with it: a pick pays nothing for
// them.
func WithOriginSettings(pattern string, s OriginSettings) Option {
	return optionFunc(func(c *config) error {
		r, err := parsePattern(pattern)
		if err != nil {
			return fmt.Errorf("pool: WithOriginSettings(%q): %w", pattern, err)
		}
		if s.Suspect > SuspectBan {
			return fmt.Errorf("pool: WithOriginSettings(%q): unknown Suspect policy %d", pattern, s.Suspect)
		}
		for _, o := range c.rules {
			if o.pattern == r.pattern {
				return fmt.Errorf("pool: WithOriginSettings(%q): pattern given twice", pattern)
			}
		}
		r.set = s
		c.rules = append(c.rules, r)
		return nil
	})
}

// patternKind orders patterns from the least specific to the most.
type patternKind uint8

const (
	patternAny      patternKind = iota // *
	patternSuffix                      // *.example.com
	patternHost                        // example.com, any port
	patternHostPort                    // example.com:8443
)

// originRule is one WithOriginSettings pattern, resolved by New over the patterns less specific
// than it that match every origin it matches (its chain): an origin whose most specific match is r
// gets r's settings.
type originRule struct {
	pattern    string // lower-cased
	kind       patternKind
	host, port string // patternSuffix: host is the suffix with its dot, ".example.com"
	set        OriginSettings

	index   int              // in Pool.rules, for the exits' caches (exitTuning.byRule)
	pairSet breaker.Settings // the chain's Pair fields, layered
	hasPair bool             // the chain sets some Pair field
	pairPol *breaker.Policy  // pool pair ← pairSet (the pool's own policy when !hasPair)
	guard   guardConfig      // the guard's settings and the Suspect policy for the origin
	eager   bool             // pairPol counts successes: pairs need a breaker from their first pick
}

func parsePattern(pattern string) (*originRule, error) {
	s := strings.ToLower(pattern)
	switch {
	case s == "":
		return nil, fmt.Errorf("empty pattern")
	case strings.ContainsAny(s, " \t\r\n/"):
		return nil, fmt.Errorf("want host, host:port, *.domain or * (an origin key, not a URL)")
	case s == "*":
		return &originRule{pattern: s, kind: patternAny}, nil
	case strings.HasPrefix(s, "*."):
		suffix := s[1:]
		switch {
		case len(suffix) < 2 || strings.HasPrefix(suffix, ".."):
			return nil, fmt.Errorf("want a domain after \"*.\"")
		case strings.Contains(suffix, "*"):
			return nil, fmt.Errorf("'*' may only be the whole pattern or its first label")
		case strings.Contains(suffix, ":"):
			return nil, fmt.Errorf("a *.domain pattern matches every port: drop the port")
		}
		return &originRule{pattern: s, kind: patternSuffix, host: suffix}, nil
	case strings.Contains(s, "*"):
		return nil, fmt.Errorf("'*' may only be the whole pattern or its first label")
	}
	host, port := splitOriginKey(s)
	if host == "" {
		return nil, fmt.Errorf("missing host")
	}
	if port == "" {
		if strings.HasSuffix(s, ":") {
			return nil, fmt.Errorf("empty port")
		}
		return &originRule{pattern: s, kind: patternHost, host: host}, nil
	}
	return &originRule{pattern: s, kind: patternHostPort, host: host, port: port}, nil
}

// splitOriginKey splits an origin key into host and port: "shop.example:8443", "[::1]:8443". A key
// with no port, or that is not host[:port] at all, is all host.
func splitOriginKey(key string) (host, port string) {
	if strings.HasPrefix(key, "[") {
		if end := strings.IndexByte(key, ']'); end >= 0 {
			if rest := key[end+1:]; len(rest) > 1 && rest[0] == ':' && allDigits(rest[1:]) {
				return key[:end+1], rest[1:]
			}
		}
		return key, ""
	}
	i := strings.LastIndexByte(key, ':')
	if i < 0 || strings.IndexByte(key[:i], ':') >= 0 || !allDigits(key[i+1:]) {
		return key, ""
	}
	return key[:i], key[i+1:]
}

// matches reports whether r matches the origin whose key splits into host and port.
func (r *originRule) matches(host, port string) bool {
	switch r.kind {
	case patternAny:
		return true
	case patternSuffix:
		return len(host) > len(r.host) && strings.EqualFold(host[len(host)-len(r.host):], r.host)
	case patternHost:
		return strings.EqualFold(host, r.host)
	}
	return port == r.port && strings.EqualFold(host, r.host)
}

// moreSpecific orders rules from the most specific to the least: host:port, host, longer
// suffixes, shorter ones, "*".
func moreSpecific(a, b *originRule) int {
	return cmp.Or(cmp.Compare(b.kind, a.kind), cmp.Compare(len(b.host), len(a.host)), cmp.Compare(a.pattern, b.pattern))
}

// resolveRules sorts the pool's patterns from the most specific to the least and resolves each
// over its chain. The pool's own pair policy and guard are set.
func (p *Pool) resolveRules(c *config) error {
	rules := slices.Clone(c.rules)
	slices.SortFunc(rules, moreSpecific)
	for i, r := range rules {
		r.index = i
		// A host that r matches stands for all of them: every less specific pattern that matches
		// it matches every origin r matches.
		host, port := r.host, r.port
		if r.kind == patternSuffix {
			host = "x" + r.host
		}
		chain := []*originRule{r}
		if r.kind != patternAny {
			for _, a := range rules[i+1:] {
				if a.matches(host, port) {
					chain = append(chain, a)
				}
			}
		}
		var pair breaker.Settings
		var guard OriginGuardSettings
		suspect := SuspectEvidence
		for _, a := range slices.Backward(chain) {
			pair = overlay(pair, a.set.Pair)
			guard = overlay(guard, a.set.Guard)
			if a.set.Suspect != SuspectDefault {
				suspect = a.set.Suspect
			}
		}
		r.pairSet, r.hasPair, r.pairPol = pair, !isZero(pair), p.pairPol
		if r.hasPair {
			pol, err := breaker.NewPolicy(overlay(c.pair, pair))
			if err != nil {
				return fmt.Errorf("pool: WithOriginSettings(%q): pair settings: %w", r.pattern, err)
			}
			r.pairPol = pol
			r.eager = pol.Settings().FailureRatio > 0
		}
		r.guard = p.guard
		if !isZero(guard) {
			g, err := newGuardConfig(overlay(c.guard, guard), c.rand)
			if err != nil {
				return fmt.Errorf("pool: WithOriginSettings(%q): %w", r.pattern, err)
			}
			r.guard = g
		}
		r.guard.suspect = suspect
	}
	p.rules = rules
	return nil
}

// ruleFor returns the most specific pattern that matches the origin key, or nil.
func (p *Pool) ruleFor(key string) *originRule {
	if len(p.rules) == 0 {
		return nil
	}
	host, port := splitOriginKey(key)
	for _, r := range p.rules {
		if r.matches(host, port) {
			return r
		}
	}
	return nil
}

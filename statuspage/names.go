package statuspage

import (
	"strings"
	"unicode/utf8"

	"github.com/proxybreaker/proxybreaker/pool"
)

// maxDisplay is the longest display name, in runes: a grid's row headers stay narrow. Longer names
// keep their start and end (a provider's user field often ends in the session id that tells exits
// apart, and the host:port follows it); the full label is the name's tooltip.
const maxDisplay = 40

// redactedPass is what pool.Exit.Label and pool.RedactRaw put where a password was.
const redactedPass = ":xxxxx"

// displayName is the compact form of an exit's label for the page: "http://user:xxxxx@host:port"
// becomes "user@host:port" (the scheme is kept unless it is http, the default), and a long name is
// cut in the middle of its user part, keeping host:port and the user part's end. The label goes through pool.RedactRaw first, so a hand-made label holding a
// password shows none.
func displayName(label string) string {
	s := pool.RedactRaw(label)
	s = strings.TrimPrefix(s, "http://")
	if at := strings.LastIndex(s, "@"); at >= 0 {
		if i := strings.LastIndex(s[:at], redactedPass); i >= 0 && i+len(redactedPass) == at {
			s = s[:i] + s[at:]
		}
	}
	if utf8.RuneCountInString(s) <= maxDisplay {
		return s
	}
	// Too long: shorten the user part, where providers put long customer and session ids, keeping
	// its end (the session id) and the whole host:port.
	if at := strings.LastIndex(s, "@"); at >= 0 {
		host := s[at:]
		if budget := maxDisplay - utf8.RuneCountInString(host); budget >= minUser {
			return shorten(s[:at], budget, budget/3) + host
		}
	}
	return shorten(s, maxDisplay, (maxDisplay-1)/2)
}

// minUser is the fewest runes a shortened user part keeps.
const minUser = 12

// shorten cuts s to n runes by replacing its middle with "…", keeping head runes of its start.
func shorten(s string, n, head int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	tail := n - 1 - head
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}

// displayNames maps each label to its display name, unique among labels: two labels whose compact
// forms collide show their full (redacted) labels instead, which are unique in a pool.
func displayNames(labels []string) map[string]string {
	names := make(map[string]string, len(labels))
	seen := make(map[string]int, len(labels))
	for _, l := range labels {
		d := displayName(l)
		names[l] = d
		seen[d]++
	}
	for _, l := range labels {
		if seen[names[l]] > 1 {
			names[l] = pool.RedactRaw(l)
		}
	}
	return names
}

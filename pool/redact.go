package pool

import (
	"slices"
	"strings"
)

// RedactRaw returns s with every password it may hold replaced by "xxxxx". s may be one proxy in
// any form ParseExit reads, valid or not (which is when an error message needs it), or a text that
// names any number of proxies: a list, a flag's value, an error message that quotes them. It errs
// on the side of hiding: what may be a password is hidden even when it is not one, and a string
// that reads both as user:pass@host and as host:port:user:pass has both readings hidden.
//
// Within each word (white space separates them) it hides everything from the first userinfo
// colon to the last '@' (the user:pass@host forms, URLs included), and everything after the user
// of a host:port:user:pass. So in a text a password ends at white space, as in a proxy list; only a
// host:port:user:pass that starts a line may hold spaces, and its password runs to the end of the
// line. A password that holds a line break is not hidden past it.
func RedactRaw(s string) string {
	var hide []span
	// A line may be a lone host:port:user:pass whose password holds spaces (to the end of the line:
	// a proxy list holds one proxy a line), and whose port may be a bad one.
	for from := 0; from < len(s); {
		eol := strings.IndexAny(s[from:], "\r\n")
		if eol < 0 {
			eol = len(s)
		} else {
			eol += from
		}
		line := s[from:eol]
		if host, port, user, ok := colonForm(line); ok {
			hide = append(hide, span{from + len(host) + len(port) + len(user) + 3, eol})
		}
		if w := splitWords(line); len(w) > 0 {
			if i := leadingColonPassword(line[w[0].from:w[0].to]); i >= 0 {
				hide = append(hide, span{from + w[0].from + i, eol})
			}
		}
		from = eol + 1
	}
	// Every reading is hidden, not only the one ParseExit would choose: text glued to a proxy in a
	// message ("u:pass@host:80\",") can turn one reading into the other.
	before := -1 // after the userinfo colon of the nearest word so far that has one
	for _, w := range splitWords(s) {
		word := s[w.from:w.to]
		if at := strings.LastIndexByte(word, '@'); at >= 0 {
			if c := userinfoColon(word[:at], false); c >= 0 {
				hide = append(hide, span{w.from + c + 1, w.from + at})
			} else if before >= 0 {
				// "http://user:pa ss@host": a password with a space, which only a lone proxy has.
				hide = append(hide, span{before, w.from + at})
			}
		}
		if i := colonPassword(word); i >= 0 {
			hide = append(hide, span{w.from + i, w.to})
		}
		if c := userinfoColon(word, true); c >= 0 {
			before = w.from + c + 1
		}
	}
	return mask(s, hide)
}

// span is the byte range [from, to) of a string.
type span struct{ from, to int }

// splitWords returns the spans of s's words: runs of anything but ASCII white space. Other spaces
// stay inside words, which only widens what is hidden.
func splitWords(s string) []span {
	var words []span
	from := -1
	for i := 0; i <= len(s); i++ {
		space := i == len(s) || s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == '\v' || s[i] == '\f'
		switch {
		case space && from >= 0:
			words = append(words, span{from, i})
			from = -1
		case !space && from < 0:
			from = i
		}
	}
	return words
}

// userinfoColon returns the index of the first colon in w that may end a user name: any but the
// colon of a "://" and those of an IPv6 literal in brackets (a userinfo cannot hold '[' or ']').
// With whole, w is a word of its own, and a colon that ends it counts only after a "://"
// ("http://user:"), not as a "key:" label.
func userinfoColon(w string, whole bool) int {
	for i := 0; i < len(w); i++ {
		if w[i] == '[' {
			if n := ipv6Literal(w[i+1:]); n > 0 {
				i += n
				continue
			}
		}
		if w[i] != ':' || strings.HasPrefix(w[i+1:], "//") {
			continue
		}
		if whole && i == len(w)-1 && !strings.Contains(w[:i], "://") {
			return -1
		}
		return i
	}
	return -1
}

// ipv6Literal returns the length of the IPv6 literal and ']' that start s (what follows a '['):
// hex digits, colons and dots. 0 if s does not start with one.
func ipv6Literal(s string) int {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ']':
			return i + 1
		case c == ':' || c == '.' || '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F':
		default:
			return 0
		}
	}
	return 0
}

// colonPassword returns where the password of a host:port:user:pass in w starts — after the first
// ":PORT:USER:" with an all-digit port and a user, wherever it is in w — or -1. A match earlier
// than the real one starts earlier still, so the password is always covered.
func colonPassword(w string) int {
	for i := strings.IndexByte(w, ':'); i >= 0; {
		rest := w[i+1:]
		digits := 0
		for digits < len(rest) && '0' <= rest[digits] && rest[digits] <= '9' {
			digits++
		}
		if digits > 0 && digits < len(rest) && rest[digits] == ':' {
			user := rest[digits+1:]
			if end := strings.IndexByte(user, ':'); end > 0 {
				return i + 1 + digits + 1 + end + 1
			}
		}
		next := strings.IndexByte(rest, ':')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return -1
}

// leadingColonPassword returns where the password of w starts when w reads as
// [scheme://]host:port:user:pass with a port that is not a number (a bad port to ParseExit, which
// still reads the rest as user and password), or -1. Numeric ports are colonForm's and
// colonPassword's; a host or port with an '@' is a userinfo's, for the '@' rule.
func leadingColonPassword(w string) int {
	off := 0
	if j, ok := hasScheme(w); ok {
		off = j + 3
	}
	rest := w[off:]
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return -1
		}
		off += end + 1
		rest = rest[end+1:]
		if !strings.HasPrefix(rest, ":") {
			return -1
		}
	}
	// The host's colon, the port's and the user's; the port and the user are not empty.
	var colons [3]int
	c := -1
	for n := range colons {
		next := strings.IndexByte(rest[c+1:], ':')
		if next < 0 || (n > 0 && next == 0) {
			return -1
		}
		c += 1 + next
		colons[n] = c
	}
	if allDigits(rest[colons[0]+1:colons[1]]) || strings.IndexByte(rest[:colons[1]], '@') >= 0 {
		return -1
	}
	return off + colons[2] + 1
}

// mask returns s with each span, merged with those it overlaps or touches, replaced by "xxxxx".
func mask(s string, hide []span) string {
	if len(hide) == 0 {
		return s
	}
	slices.SortFunc(hide, func(a, b span) int { return a.from - b.from })
	var b strings.Builder
	b.Grow(len(s))
	done := 0
	for i := 0; i < len(hide); {
		cur := hide[i]
		for i++; i < len(hide) && hide[i].from <= cur.to; i++ {
			cur.to = max(cur.to, hide[i].to)
		}
		b.WriteString(s[done:cur.from])
		b.WriteString("xxxxx")
		done = cur.to
	}
	b.WriteString(s[done:])
	return b.String()
}

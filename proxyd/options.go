package proxyd

import (
	"fmt"
	"strings"

	"github.com/proxybreaker/proxybreaker/pool"
)

// Options are what a client asks of the pick for one request or tunnel, written in the proxy
// username (the convention of providers and of Bright Data's proxy manager), in the
// X-Proxybreaker-Options header of a plain-HTTP request, or fixed by a profile listener.
//
// The grammar, one username:
//
//	username = account *( "-" option )
//	option   = "session-" id          sticky: one exit per site for the id (pool.Request.Session)
//	         / "tier-" n              only exits of tier n (pool.WantTier)
//	         / "exit-" label          only the exit labelled label (pool.Request.Exit); the rest of
//	                                  the username is the label, so it comes last and may hold '-'
//	         / key "-" values         any attribute of the exit (pool.Want): country-us, city-nyc,
//	                                  asn-7922; values may list alternatives: country-us,ca
//
// account is the listener credential's user name (anything without '-' when the listener has no
// credentials). id, n and values are 1 to 64 bytes of letters, digits, '_', '.' and ',' (',' only
// between values); keys follow the attribute alphabet without '-'. Each key appears once. The
// header takes the same options without the account: "session-abc-country-us". Anything else —
// an unknown shape, a key twice, an empty value — is an *OptionError, answered 400 with the reason.
type Options struct {
	Session string
	Exit    string
	Want    *pool.Want
	// matches are the Want's parts, kept to merge Options of several sources.
	matches []pool.Match
}

// OptionsHeader is the plain-HTTP request header that carries options; it is removed before the
// request is sent on.
const OptionsHeader = "X-Proxybreaker-Options"

// maxOptionValue bounds one option's value, in bytes.
const maxOptionValue = 64

// OptionError is a username or option header the daemon cannot read: it is answered 400 (SOCKS5:
// "connection not allowed by ruleset") with Reason.
type OptionError struct {
	Reason string
}

// Error returns "proxyd: options: " and the reason.
func (e *OptionError) Error() string { return "proxyd: options: " + e.Reason }

func optionErr(format string, args ...any) *OptionError {
	return &OptionError{Reason: fmt.Sprintf(format, args...)}
}

// SplitUsername splits a proxy username into its account and its options text (after the first
// '-'; "" when there is none).
func SplitUsername(user string) (account, options string) {
	account, options, _ = strings.Cut(user, "-")
	return account, options
}

// ParseOptions parses options text ("session-abc-country-us"; no account). The empty text is the
// zero Options. Session ids never appear in the error.
func ParseOptions(s string) (Options, error) {
	var o Options
	if s == "" {
		return o, nil
	}
	seen := map[string]bool{}
	rest := s
	for rest != "" {
		key, after, ok := strings.Cut(rest, "-")
		if !ok || key == "" {
			return Options{}, optionErr("%q: want key-value pairs such as session-abc or country-us", clip(rest))
		}
		if seen[key] {
			return Options{}, optionErr("option %s given twice", clip(key))
		}
		seen[key] = true
		if key == "exit" {
			if after == "" {
				return Options{}, optionErr("exit: empty label")
			}
			o.Exit, rest = after, ""
			continue
		}
		value, next, _ := strings.Cut(after, "-")
		rest = next
		if err := checkOptionValue(key, value); err != nil {
			return Options{}, err
		}
		switch key {
		case "session":
			if strings.Contains(value, ",") {
				return Options{}, optionErr("session: an id, not a list")
			}
			o.Session = value
		default:
			o.matches = append(o.matches, pool.Match{Key: key, Values: strings.Split(value, ",")})
		}
	}
	if err := o.buildWant(); err != nil {
		return Options{}, err
	}
	return o, nil
}

// checkOptionValue validates one option's value. A session id is not quoted in the error.
func checkOptionValue(key, v string) error {
	name := clip(key)
	if v == "" {
		return optionErr("%s: empty value", name)
	}
	if len(v) > maxOptionValue {
		return optionErr("%s: value of %d bytes, want at most %d", name, len(v), maxOptionValue)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == ',') {
			return optionErr("%s: byte %d of its value is not a letter, digit, '_', '.' or ','", name, i+1)
		}
	}
	if v[0] == ',' || v[len(v)-1] == ',' || strings.Contains(v, ",,") {
		return optionErr("%s: empty alternative in its value", name)
	}
	return nil
}

// buildWant makes o.Want of o.matches.
func (o *Options) buildWant() error {
	w, err := pool.NewWant(o.matches...)
	if err != nil {
		return &OptionError{Reason: strings.TrimPrefix(err.Error(), "pool: want: ")}
	}
	o.Want = w
	return nil
}

// Merge returns o with the options of p added: a profile's fixed options and a request's own. A
// key both give is an *OptionError.
func (o Options) Merge(p Options) (Options, error) {
	switch {
	case o.Session != "" && p.Session != "":
		return Options{}, optionErr("session given twice (the listener's profile sets it)")
	case o.Exit != "" && p.Exit != "":
		return Options{}, optionErr("exit given twice (the listener's profile sets it)")
	}
	if p.Session != "" {
		o.Session = p.Session
	}
	if p.Exit != "" {
		o.Exit = p.Exit
	}
	if len(p.matches) == 0 {
		return o, nil
	}
	o.matches = append(append([]pool.Match(nil), o.matches...), p.matches...)
	if err := o.buildWant(); err != nil {
		return Options{}, err
	}
	return o, nil
}

// request returns the pool.Request for origin with o's options.
func (o Options) request(origin string) pool.Request {
	return pool.Request{Origin: origin, Session: o.Session, Exit: o.Exit, Want: o.Want}
}

// clip shortens text quoted in an error.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

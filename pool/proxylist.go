package pool

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// maxListErrors bounds how many bad lines ReadExits reports, so a wrong file does not produce a
// megabyte of errors.
const maxListErrors = 10

// maxListLine is the longest line ReadExits reads, in bytes, not counting its line ending: 64 KiB,
// bufio.Scanner's own default. A proxy line is a URL with credentials and a few attributes, a few
// hundred bytes even with a provider's long session user names; a longer line is not a proxy list
// (a binary file, a JSON dump read by mistake), and reading it whole would let one line take all
// memory.
const maxListLine = 64 << 10

// ReadExits reads a proxy list: one proxy per line in any form ParseExit accepts, optionally
// followed by space-separated attributes:
//
//	# datacenter pool
//	http://user:pass@dc1.example:8080  label=dc-1 tier=0 weight=2
//	res.example:7777:user-session-42:secret  tier=1 failures=5 cooldown=1m exit-park=1h
//
// label, tier and weight are Exit.WithLabel, WithTier and WithWeight. Any other key=value is an
// attribute of the exit (Exit.WithAttr; country=us kind=residential, for Request.Want), in the
// alphabet attrs.go documents; a key one typo away from a field below (wieght=2) is an error. The
// breaker attributes give
// the exit settings of its own (Exit.WithPairSettings for its pair breakers, Exit.WithExitSettings
// with the exit- prefix for its own breaker), each replacing one field of the pool's settings:
//
//	failures=N        FailureThreshold (1 to 1024)     exit-failures=N
//	window=D          Window                            exit-window=D
//	cooldown=D        BaseCooldown                      exit-cooldown=D
//	max-cooldown=D    MaxCooldown                       exit-max-cooldown=D
//	park=D            ParkFor                           exit-park=D
//
// D is a positive Go duration (30s, 15m, 2h). A max-cooldown shorter than the cooldown on the same
// line is an error here; the rest is validated against the pool's settings when the exits join
// a pool (Add, Sync), whose error names the exit.
//
// Blank lines and lines starting with # are skipped. A line may hold up to 64 KiB (65,536 bytes,
// not counting its line ending); a longer one is an error, and reading goes on at the next line.
// Each bad line is one error that gives the line number, the field that is wrong (field 1 is the
// proxy, the attributes follow) and the redacted proxy, never a password:
//
//	pool: proxy list: line 2: field 1: proxy "not": want host:port or host:port:user:pass
//	pool: proxy list: line 3: proxy dc-1: field 3: tier "x": want an integer
//
// Up to ten bad lines are reported together.
func ReadExits(r io.Reader) ([]*Exit, error) {
	// Room for the longest line and a CRLF: a longer line arrives in pieces (isPrefix), never whole.
	br := bufio.NewReaderSize(r, maxListLine+2)
	var (
		exits []*Exit
		errs  []error
		line  int
	)
	bad := func(err error) {
		if len(errs) < maxListErrors {
			errs = append(errs, err)
		}
	}
	for {
		b, isPrefix, err := br.ReadLine()
		if err == io.EOF {
			break
		}
		if err != nil {
			bad(fmt.Errorf("after line %d: %w", line, err))
			break
		}
		line++
		if isPrefix || len(b) > maxListLine {
			// Name the line and the limit, never the text: it may hold a password.
			bad(fmt.Errorf("line %d: longer than %d bytes, the most a proxy line may hold", line, maxListLine))
			if err := skipLine(br, isPrefix); err != nil {
				bad(fmt.Errorf("after line %d: %w", line, err))
				break
			}
			continue
		}
		text := strings.TrimSpace(string(b))
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		e, err := parseListLine(text)
		if err != nil {
			bad(fmt.Errorf("line %d: %w", line, err))
			continue
		}
		exits = append(exits, e)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("pool: proxy list: %w", errors.Join(errs...))
	}
	return exits, nil
}

// skipLine discards the rest of a line ReadLine returned only the start of (more says so), a buffer
// at a time. The end of the input ends the line.
func skipLine(br *bufio.Reader, more bool) error {
	for more {
		var err error
		if _, more, err = br.ReadLine(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
	return nil
}

// parseListLine parses one proxy-list line. Its errors name the field that is wrong by position
// (field 1 is the proxy) and, past the proxy, the proxy too; ReadExits adds the line number.
func parseListLine(text string) (*Exit, error) {
	fields := strings.Fields(text)
	e, err := ParseExit(fields[0])
	if err != nil {
		// ParseExit's error already names the proxy, redacted, after the package prefix that
		// ReadExits gives the whole list: one prefix, not two.
		return nil, fmt.Errorf("field 1: %s", strings.TrimPrefix(err.Error(), "pool: "))
	}
	var over listOverride
	for i, f := range fields[1:] {
		field := i + 2
		bad := func(format string, args ...any) error {
			return fmt.Errorf("proxy %s: field %d: %s", e.Label(), field, fmt.Sprintf(format, args...))
		}
		// A field that is not a known attribute may be the tail of a password with a space in it:
		// errors name its position, never its text.
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, bad("want key=value (passwords cannot contain spaces in a list)")
		}
		switch k {
		case "label":
			if v == "" {
				return nil, bad("empty label")
			}
			e = e.WithLabel(v)
		case "tier":
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, bad("tier %q: want an integer", v)
			}
			e = e.WithTier(n)
		case "weight":
			w, err := strconv.ParseFloat(v, 64)
			if err != nil || !(w > 0) || math.IsInf(w, 0) {
				return nil, bad("weight %q: want a positive number", v)
			}
			e = e.WithWeight(w)
		default:
			known, err := over.set(k, v)
			if err != nil {
				return nil, bad("%v", err)
			}
			if known {
				break
			}
			// Any other key=value is an attribute of the exit (attrs.go) — unless it is one typo
			// away from a field of the list's own, which would otherwise vanish into one.
			if near := nearListField(k); near != "" {
				return nil, bad("%q: not an attribute this close to %s (a typo?); attribute keys must not be a list field's name but for one letter", k, near)
			}
			if err := checkAttr(k, v); err != nil {
				return nil, bad("%v", err)
			}
			if _, dup := e.Attr(k); dup {
				return nil, bad("attribute %s given twice", k)
			}
			e = e.WithAttr(k, v)
		}
	}
	if err := over.check(); err != nil {
		return nil, fmt.Errorf("proxy %s: %w", e.Label(), err)
	}
	if err := checkTemplateLine(e); err != nil {
		return nil, fmt.Errorf("proxy %s: gateway: %w", e.Label(), err) // gateway_template.go
	}
	if over != (listOverride{}) {
		e = e.WithPairSettings(over.pair.settings()).WithExitSettings(over.exit.settings())
	}
	return e, nil
}

// breakerAttrNames lists the breaker attributes of a proxy-list line, for errors.
const breakerAttrNames = "failures, window, cooldown, max-cooldown, park, and the same with exit-"

// listOverride is the breaker attributes of one proxy-list line: for the exit's pair breakers
// (failures=, window=, cooldown=, max-cooldown=, park=) and, prefixed exit-, for its own breaker.
type listOverride struct{ pair, exit listSettings }

// listSettings is the part of breaker.Settings a list line may set. Zero fields inherit.
type listSettings struct {
	failures                        int
	window, cooldown, maxCool, park time.Duration
}

func (l listSettings) settings() breaker.Settings {
	return breaker.Settings{FailureThreshold: l.failures, Window: l.window, BaseCooldown: l.cooldown, MaxCooldown: l.maxCool, ParkFor: l.park}
}

// set applies attribute k=v; known is false when k is no breaker attribute. A value is a positive
// integer (failures, at most breaker.MaxFailureThreshold) or a positive duration ("30s", "15m").
func (o *listOverride) set(k, v string) (known bool, err error) {
	s := &o.pair
	name := k
	if rest, ok := strings.CutPrefix(k, "exit-"); ok {
		s, name = &o.exit, rest
	}
	var d *time.Duration
	switch name {
	case "failures":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > breaker.MaxFailureThreshold {
			return true, fmt.Errorf("%s %q: want an integer from 1 to %d", k, v, breaker.MaxFailureThreshold)
		}
		s.failures = n
		return true, nil
	case "window":
		d = &s.window
	case "cooldown":
		d = &s.cooldown
	case "max-cooldown":
		d = &s.maxCool
	case "park":
		d = &s.park
	default:
		return false, nil
	}
	x, err := time.ParseDuration(v)
	if err != nil || x <= 0 {
		return true, fmt.Errorf("%s %q: want a positive duration (30s, 15m, 2h)", k, v)
	}
	*d = x
	return true, nil
}

// check refuses what no pool could accept, so the line is named: a max-cooldown shorter than the
// cooldown on the same line. The rest is checked against the pool's settings when the exit joins.
func (o *listOverride) check() error {
	for _, c := range []struct {
		prefix string
		s      listSettings
	}{{"", o.pair}, {"exit-", o.exit}} {
		if c.s.maxCool != 0 && c.s.maxCool < c.s.cooldown {
			return fmt.Errorf("%smax-cooldown %v is shorter than %scooldown %v", c.prefix, c.s.maxCool, c.prefix, c.s.cooldown)
		}
	}
	return nil
}

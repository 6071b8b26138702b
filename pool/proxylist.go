package pool

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// maxListErrors bounds how many bad lines ReadExits reports, so a wrong file does not produce a
// megabyte of errors.
const maxListErrors = 10

// ReadExits reads a proxy list: one proxy per line in any form ParseExit accepts, optionally
// followed by space-separated attributes:
//
//	# datacenter pool
//	http://user:pass@dc1.example:8080  label=dc-1 tier=0 weight=2
//	res.example:7777:user-session-42:secret  tier=1
//
// Blank lines and lines starting with # are skipped. Errors give the line number and the redacted
// proxy, never a password; up to ten bad lines are reported together.
func ReadExits(r io.Reader) ([]*Exit, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	var (
		exits []*Exit
		errs  []error
		line  int
	)
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		e, err := parseListLine(text)
		if err != nil {
			if len(errs) < maxListErrors {
				errs = append(errs, fmt.Errorf("line %d: %w", line, err))
			}
			continue
		}
		exits = append(exits, e)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("after line %d: %w", line, err))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("pool: proxy list: %w", errors.Join(errs...))
	}
	return exits, nil
}

func parseListLine(text string) (*Exit, error) {
	fields := strings.Fields(text)
	e, err := ParseExit(fields[0])
	if err != nil {
		return nil, err
	}
	for i, f := range fields[1:] {
		// A field that is not a known attribute may be the tail of a password with a space in it:
		// errors name its position, never its text.
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("proxy %s: field %d after the proxy: want key=value (passwords cannot contain spaces in a list)", e.Label(), i+1)
		}
		switch k {
		case "label":
			if v == "" {
				return nil, fmt.Errorf("proxy %s: empty label", e.Label())
			}
			e = e.WithLabel(v)
		case "tier":
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("proxy %s: tier %q: want an integer", e.Label(), v)
			}
			e = e.WithTier(n)
		case "weight":
			w, err := strconv.ParseFloat(v, 64)
			if err != nil || !(w > 0) || math.IsInf(w, 0) {
				return nil, fmt.Errorf("proxy %s: weight %q: want a positive number", e.Label(), v)
			}
			e = e.WithWeight(w)
		default:
			return nil, fmt.Errorf("proxy %s: field %d after the proxy: unknown attribute (want label, tier or weight)", e.Label(), i+1)
		}
	}
	return e, nil
}

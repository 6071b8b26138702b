package transport

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfterSeconds keeps the arithmetic safe; breakers cap the result far lower
// (breaker.Settings.MaxRetryAfter).
const maxRetryAfterSeconds = 100 * 365 * 24 * 3600

// ParseRetryAfter parses a Retry-After header value at now: delay-seconds ("120") or an HTTP-date
// ("Wed, 21 Oct 2015 07:28:00 GMT", and the two obsolete forms net/http accepts). A date in the past
// gives 0; a negative or malformed value gives ErrBadRetryAfter; an absurdly large one is clamped
// to a century (breakers then apply their own cap). The empty string gives 0 and no error.
func ParseRetryAfter(v string, now time.Time) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, nil
	}
	if c := v[0]; c == '-' || c == '+' || (c >= '0' && c <= '9') {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			var ne *strconv.NumError
			if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
				return maxRetryAfterSeconds * time.Second, nil
			}
			return 0, ErrBadRetryAfter
		}
		return time.Duration(min(n, maxRetryAfterSeconds)) * time.Second, nil
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, ErrBadRetryAfter
	}
	d := t.Sub(now)
	if d < 0 {
		return 0, nil
	}
	return min(d, maxRetryAfterSeconds*time.Second), nil
}

package transport

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	// now is the instant of RFC 9110's example date, so dates read as offsets from it.
	now := time.Date(2015, 10, 21, 7, 28, 0, 0, time.UTC)
	const century = 100 * 365 * 24 * time.Hour
	tests := []struct {
		v       string
		want    time.Duration
		wantErr bool
	}{
		{"", 0, false},
		{"   ", 0, false},
		{"0", 0, false},
		{"1", time.Second, false},
		{"120", 120 * time.Second, false},
		{" 120 ", 120 * time.Second, false},
		{"\t120\r\n", 120 * time.Second, false},
		{"007", 7 * time.Second, false},
		{"99999999", 99999999 * time.Second, false},
		{"3153600000", century, false},           // exactly a century
		{"3153600001", century, false},           // a second more: clamped
		{"18446744073709551615", century, false}, // max uint64
		{"123456789012345678901234567890", century, false},
		// HTTP-date, in the three forms net/http accepts.
		{"Wed, 21 Oct 2015 07:30:00 GMT", 2 * time.Minute, false},     // IMF-fixdate
		{"Wednesday, 21-Oct-15 07:30:00 GMT", 2 * time.Minute, false}, // RFC 850
		{"Wed Oct 21 07:30:00 2015", 2 * time.Minute, false},          // asctime
		{"  Wed, 21 Oct 2015 07:28:01 GMT  ", time.Second, false},     // whitespace
		{"Wed, 21 Oct 2015 07:28:00 GMT", 0, false},                   // now
		{"Wed, 21 Oct 2015 07:00:00 GMT", 0, false},                   // past
		{"Thu, 01 Jan 1970 00:00:00 GMT", 0, false},                   // long past
		{"Fri, 31 Dec 9999 23:59:59 GMT", century, false},             // clamped
		{"Wednesday, 21-Oct-15 07:27:00 GMT", 0, false},               // RFC 850, past
		{"Wed Oct 21 07:27:00 2015", 0, false},                        // asctime, past
		// Errors.
		{"-1", 0, true},
		{"-0", 0, true},
		{"-120", 0, true},
		{"-99999999999999999999999999", 0, true},
		{"+120", 0, true},
		{"1.5", 0, true},
		{"120s", 0, true},
		{"12 0", 0, true},
		{"0x10", 0, true},
		{"1e3", 0, true},
		{"soon", 0, true},
		{"Wed, 21 Oct 2015 07:30:00", 0, true},
		{"Wed, 21 Oct 2015 25:30:00 GMT", 0, true},
		{"2015-10-21T07:30:00Z", 0, true},
		{"\x00", 0, true},
	}
	for i, tt := range tests {
		got, err := ParseRetryAfter(tt.v, now)
		if tt.wantErr {
			if !errors.Is(err, ErrBadRetryAfter) || got != 0 {
				t.Errorf("%d: ParseRetryAfter(%q) = %v, %v, want 0, ErrBadRetryAfter", i, tt.v, got, err)
			}
			if err != nil && !strings.Contains(err.Error(), "transport:") {
				t.Errorf("%d: ParseRetryAfter(%q) error %q, want the package prefix", i, tt.v, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%d: ParseRetryAfter(%q) = %v, %v, want %v, nil", i, tt.v, got, err, tt.want)
		}
	}
}

// A clock far in the past or the future must not overflow into a negative delay.
func TestParseRetryAfterExtremeNow(t *testing.T) {
	const century = 100 * 365 * 24 * time.Hour
	for _, now := range []time.Time{{}, time.Unix(0, 0), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		for _, v := range []string{"Wed, 21 Oct 2015 07:30:00 GMT", "60", "99999999999999"} {
			got, err := ParseRetryAfter(v, now)
			if err != nil || got < 0 || got > century {
				t.Errorf("ParseRetryAfter(%q, %v) = %v, %v, want a delay in [0, a century], nil", v, now, got, err)
			}
		}
	}
}

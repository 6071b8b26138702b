package tally

import "testing"

// TestLine: counts print sorted by key with the format given, and an empty tally as "none".
func TestLine(t *testing.T) {
	for i, tc := range []struct {
		m      map[string]int
		format string
		want   string
	}{
		{nil, "%s %d", "none"},
		{map[string]int{"dc-2": 5, "dc-1": 12, "auth-bad proxy_auth": 1}, "%s %d", "auth-bad proxy_auth 1, dc-1 12, dc-2 5"},
		{map[string]int{"200 via dc-1": 3}, "%s ×%d", "200 via dc-1 ×3"},
	} {
		if got := Line(tc.m, tc.format); got != tc.want {
			t.Errorf("step %d: Line(%v, %q) = %q, want %q", i, tc.m, tc.format, got, tc.want)
		}
	}
}

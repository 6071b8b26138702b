package tally

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Line prints m's counts with format (a %s for the key, then a %d for the count), sorted by key
// and joined by ", "; "none" when m is empty.
func Line(m map[string]int, format string) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf(format, k, m[k]))
	}
	return strings.Join(parts, ", ")
}

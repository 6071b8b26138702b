// Package tally prints the counts a runnable example keeps (requests by exit, failures by class)
// as one line, in the order of their keys so that two runs read alike.
//
//	map[string]int{"dc-2": 5, "dc-1": 12} → tally.Line(m, "%s ×%d") → "dc-1 ×12, dc-2 ×5"
package tally

package main

import (
	"os"
	"strings"
)

// fleetHeading starts the section of RESULTS.md that BenchmarkFleetScale's figures are copied
// into (it runs in the main module, against a Redis Cluster, not from benchall): benchall keeps
// that section as it finds it, at the end of the file.
const fleetHeading = "## Fleet at scale"

// keptFleet returns the fleet section of text, from its heading to the next section or the end,
// or "" if it has none.
func keptFleet(text string) string {
	i := strings.Index(text, "\n"+fleetHeading)
	if i < 0 {
		return ""
	}
	section := text[i:]
	if j := strings.Index(section[1:], "\n## "); j >= 0 {
		section = section[:j+1]
	}
	return section
}

// keptFleetOf is keptFleet of the file at path ("" if it cannot be read).
func keptFleetOf(path string) string {
	old, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return keptFleet(string(old))
}

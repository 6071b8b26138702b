package main

import (
	"os"
	"strings"
)

// keptHeadings start the sections of RESULTS.md whose figures come from runs benchall does not
// repeat — BenchmarkFleetScale (against a Redis Cluster) and BenchmarkPickWant, both in the main
// module, and the round-3 seeds held out until the round's end, run once: benchall keeps those
// sections as it finds them, at the end of the file.
var keptHeadings = []string{"## Fleet at scale", "## Pick with a Want", "## Round 3, held-out seeds"}

// keptSections returns the kept sections of text, each from its heading to the next section or
// the end, in the order of keptHeadings; "" if it has none.
func keptSections(text string) string {
	var b strings.Builder
	for _, h := range keptHeadings {
		i := strings.Index(text, "\n"+h)
		if i < 0 {
			continue
		}
		section := text[i:]
		if j := strings.Index(section[1:], "\n## "); j >= 0 {
			section = section[:j+1]
		}
		b.WriteString(section)
	}
	return b.String()
}

// keptSectionsOf is keptSections of the file at path ("" if it cannot be read).
func keptSectionsOf(path string) string {
	old, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return keptSections(string(old))
}

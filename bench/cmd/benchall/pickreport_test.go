package main

import "testing"

func TestSplicePickReport(t *testing.T) {
	text := "\n" + pickReportHeading + "\n\nnew\n"
	for i, tc := range []struct{ old, want string }{
		{"# R\n\n## Pick at scale\n\nx\n\n## Scale: y\n", "# R\n\n## Pick at scale\n\nx\n" + text + "\n## Scale: y\n"},
		{"# R\n" + "\n" + pickReportHeading + "\n\nold\n\n## Scale: y\n", "# R\n" + text + "\n## Scale: y\n"},
		{"# R\n" + "\n" + pickReportHeading + "\n\nold\n", "# R\n" + text},
	} {
		if got, ok := splicePickReport(tc.old, text); !ok || got != tc.want {
			t.Errorf("%d: splicePickReport(%q) = %q, %v; want %q", i, tc.old, got, ok, tc.want)
		}
	}
	if _, ok := splicePickReport("# R\n\n## Overhead: x\n", text); ok {
		t.Error("splicePickReport of a file with neither section: ok, want not")
	}
}

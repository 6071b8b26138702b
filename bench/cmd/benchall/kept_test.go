package main

import "testing"

func TestKeptSections(t *testing.T) {
	for i, tc := range []struct{ text, want string }{
		{"# R\n\n## Overhead: x\n", ""},
		{"# R\n\n## Overhead: x\n\n## Fleet at scale (store/redis)\n\nfigures\n", "\n## Fleet at scale (store/redis)\n\nfigures\n"},
		{"# R\n\n## Fleet at scale\n\nfigures\n\n## Overhead: x\n", "\n## Fleet at scale\n\nfigures\n"},
		{"# R\n\n## Pick with a Want\n\nw\n\n## Overhead: x\n\n## Fleet at scale\n\nf\n", "\n## Fleet at scale\n\nf\n\n## Pick with a Want\n\nw\n"},
	} {
		if got := keptSections(tc.text); got != tc.want {
			t.Errorf("%d: keptSections(%q) = %q, want %q", i, tc.text, got, tc.want)
		}
	}
}

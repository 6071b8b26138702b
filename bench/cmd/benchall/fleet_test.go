package main

import "testing"

func TestKeptFleet(t *testing.T) {
	for i, tc := range []struct{ text, want string }{
		{"# R\n\n## Overhead: x\n", ""},
		{"# R\n\n## Overhead: x\n\n## Fleet at scale (store/redis)\n\nfigures\n", "\n## Fleet at scale (store/redis)\n\nfigures\n"},
		{"# R\n\n## Fleet at scale\n\nfigures\n\n## Overhead: x\n", "\n## Fleet at scale\n\nfigures\n"},
	} {
		if got := keptFleet(tc.text); got != tc.want {
			t.Errorf("%d: keptFleet(%q) = %q, want %q", i, tc.text, got, tc.want)
		}
	}
}

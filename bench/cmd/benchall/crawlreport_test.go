package main

import (
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/bench/sim"
)

func TestCrawlFigures(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {48021, "48,021"}, {1234567, "1,234,567"}} {
		if got := thousands(c.n); got != c.want {
			t.Errorf("thousands(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	for _, c := range []struct {
		d    time.Duration
		want string
	}{{58 * time.Minute, "58 min"}, {2*time.Hour + 4*time.Minute + 20*time.Second, "2 h 04 min"}, {12 * time.Hour, "12 h 00 min"}} {
		if got := hm(c.d); got != c.want {
			t.Errorf("hm(%v) = %q, want %q", c.d, got, c.want)
		}
	}
	done := sim.CrawlResult{Finished: true, Makespan: 3 * time.Hour, Quota: []int{10}, Pages: []int{10}, Done: []time.Duration{3 * time.Hour}}
	left := sim.CrawlResult{Makespan: 12 * time.Hour, Quota: []int{50000}, Pages: []int{1979}, Done: []time.Duration{0}}
	oracle := sim.CrawlResult{Finished: true, Makespan: 2 * time.Hour, Quota: []int{10}, Pages: []int{10}, Done: []time.Duration{2 * time.Hour}}
	if got, want := makespan(left), "not finished: 48,021 left"; got != want {
		t.Errorf("makespan(unfinished) = %q, want %q", got, want)
	}
	if got, want := slower(done, oracle), "1.50"; got != want {
		t.Errorf("slower(3 h, 2 h) = %q, want %q", got, want)
	}
	if got, want := slower(left, oracle), "> 6.0"; got != want {
		t.Errorf("slower(unfinished at 12 h, 2 h) = %q, want %q", got, want)
	}
	if !faster(done, left) || faster(left, done) || !faster(oracle, done) {
		t.Errorf("faster: a finished crawl beats an unfinished one, the sooner beats the later")
	}
}

// TestCrawlSectionLeads checks that -only crawl -write adds its section at the head of a file that
// has none, before the simulation's, and then replaces it in place.
func TestCrawlSectionLeads(t *testing.T) {
	old := "# Bench results\n\n## Pool simulation\n\nsim\n\n## Overhead: x\n"
	splice := spliceSectionBefore("RESULTS.md", crawlHeading, "crawl", "## Pool simulation\n")
	s, err := splice(old, crawlHeading+"\nfirst\n\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Bench results\n\n" + crawlHeading + "\nfirst\n\n## Pool simulation\n\nsim\n\n## Overhead: x\n"; s != want {
		t.Errorf("added:\n%s\nwant:\n%s", s, want)
	}
	s, err = splice(s, crawlHeading+"\nsecond\n\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Bench results\n\n" + crawlHeading + "\nsecond\n\n## Pool simulation\n\nsim\n\n## Overhead: x\n"; s != want {
		t.Errorf("replaced:\n%s\nwant:\n%s", s, want)
	}
}

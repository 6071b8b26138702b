package main

import (
	"fmt"
	"log"
	"strings"

	"github.com/proxybreaker/proxybreaker/bench/measure"
)

// pickReportHeading starts the section of RESULTS.md with measure.PickReport's figures (issue 28).
// writeMeasures writes it after "Pick at scale"; -only pickreport rewrites it alone.
const pickReportHeading = "## Pick and report, beside gobreaker"

// pickReportRounds is how many times each side is measured at each size (medians).
const pickReportRounds = 3

// pickReportSizes are the pool sizes of the section: exits for one origin.
var pickReportSizes = []int{10, 1000, 100000}

// writePickReport runs measure.PickReport at each size and writes the section.
func writePickReport(p func(string, ...any)) {
	log.Print("pick and report")
	p("\n%s\n\n", pickReportHeading)
	p("`measure.PickReport`: a pool of N exits for one origin, one pair in ten parked OPEN; each op picks for the origin and reports one success on the lease (`PickAt` + `ReportAt`, one instant of a fake clock). ")
	p("The peer is a pool of gobreaker/v2 two-step breakers, one per exit, one in ten OPEN: a random exit whose breaker is not OPEN (8 draws, then a scan), `Allow`, `done(nil)`. Both measured in the same run, alternating, %d rounds each; medians.\n\n", pickReportRounds)
	p("| exits | ours serial | ours `RunParallel` | ours allocs/op | gobreaker serial | gobreaker `RunParallel` | gobreaker allocs/op | ours ÷ gobreaker (serial) |\n|---|---|---|---|---|---|---|---|\n")
	var notSlower []string
	for _, n := range pickReportSizes {
		r, err := measure.PickReport(n, pickReportRounds, 1)
		if err != nil {
			log.Fatal(err)
		}
		ratio := r.Ours.Serial.NsPerOp / r.Peer.Serial.NsPerOp
		p("| %d | %.0f ns | %.0f ns | %d | %.0f ns | %.0f ns | %d | %.2f |\n", n, r.Ours.Serial.NsPerOp, r.Ours.Parallel.NsPerOp, r.Ours.Serial.AllocsPerOp,
			r.Peer.Serial.NsPerOp, r.Peer.Parallel.NsPerOp, r.Peer.Serial.AllocsPerOp, ratio)
		notSlower = append(notSlower, fmt.Sprintf("%d exits: %s", n, verdict(ratio <= 1)))
	}
	p("\nIssue 28: pick + report no slower than gobreaker's per exit (serial, this run) — %s.\n", strings.Join(notSlower, ", "))
}

// onlyPickReport runs writePickReport alone: its section goes to stdout, or with write replaces
// the section of out (inserted before "## Scale:" if out has none yet).
func onlyPickReport(write bool, out string) error {
	var b strings.Builder
	writePickReport(func(format string, a ...any) { fmt.Fprintf(&b, format, a...) })
	return printOrSplice(write, out, b.String(), func(old, text string) (string, error) {
		s, ok := splicePickReport(old, text)
		if !ok {
			return "", fmt.Errorf("%s has neither a %q nor a \"## Scale:\" section", out, pickReportHeading)
		}
		return s, nil
	})
}

// splicePickReport replaces the pick-and-report section of old by text (which starts with a
// newline and its heading), or inserts text before the scale section; ok is false when old has
// neither.
func splicePickReport(old, text string) (string, bool) {
	if i := strings.Index(old, "\n"+pickReportHeading); i >= 0 {
		end := len(old)
		if j := strings.Index(old[i+1:], "\n## "); j >= 0 {
			end = i + 1 + j
		}
		return old[:i] + text + old[end:], true
	}
	i := strings.Index(old, "\n## Scale:")
	if i < 0 {
		return "", false
	}
	return old[:i] + text + old[i:], true
}

package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/examples/internal/leakwatch"
	"github.com/proxybreaker/proxybreaker/examples/internal/world"
	"github.com/proxybreaker/proxybreaker/pool"
)

// summary is the outcome of a run: what the callers saw, what each exit did and what each breaker
// went through.
type summary struct {
	Seed          uint64
	Interrupted   bool     // the run was cut short by its context (Ctrl-C)
	Origins       []string // origin names, in table order
	Sent          int
	Successes     int
	RefusedNoExit int
	RefusedOrigin int
	Failures      map[pool.Class]int  // failed requests by verdict class
	Examples      map[string]string   // the first thing a caller saw, by class or refusal kind
	Exits         []exitReport        // in table order
	Pairs         map[pairKey]history // every pair breaker that changed state
	Guards        map[string]history  // every origin guard that changed state, by origin name
	Checked       int                 // successes whose connection was checked against the exit named
	Misrouted     int                 // ... whose connection led to another exit's proxy
	Direct        int                 // requests the origins received from no proxy at all
	Elapsed       time.Duration
	Lines, Leaks  int // lines printed, and lines holding a password (filled in after printing)
}

// exitReport is one exit's part of the summary.
type exitReport struct {
	exitTally
	Label string
	Tier  int
	Role  string
}

// carried is the number of requests the exit carried successfully.
func (e exitReport) carried() int {
	n := 0
	for _, v := range e.OK {
		n += v
	}
	return n
}

func buildSummary(w *scene, rec *recorder, st *loadStats) summary {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	s := summary{
		Sent: int(st.sent.Load()), Successes: int(st.ok.Load()),
		RefusedNoExit: st.refusedNoExit, RefusedOrigin: st.refusedOrigin,
		Failures: maps.Clone(st.failures), Examples: maps.Clone(st.examples),
		Pairs: map[pairKey]history{}, Guards: map[string]history{},
		Checked: st.checked, Misrouted: st.misrouted,
	}
	for i, e := range w.Exits {
		r := exitReport{Label: e.Label(), Tier: e.Tier(), Role: exitSpecs[i].Role}
		if t := rec.exits[e.Label()]; t != nil {
			r.exitTally = *t
		}
		s.Exits = append(s.Exits, r)
	}
	for k, h := range rec.pairs {
		s.Pairs[k] = *h
	}
	for k, h := range rec.origins {
		s.Guards[k] = *h
	}
	for _, o := range w.origins {
		s.Origins = append(s.Origins, o.Name)
		s.Direct += o.servedBy()[""]
	}
	return s
}

// exit returns the report for label.
func (s summary) exit(label string) exitReport {
	for _, e := range s.Exits {
		if e.Label == label {
			return e
		}
	}
	return exitReport{}
}

func printSummary(out *leakwatch.Writer, s summary) {
	var b strings.Builder
	attempted := s.Sent - s.RefusedNoExit - s.RefusedOrigin
	how := ""
	if s.Interrupted {
		how = ", interrupted"
	}
	fmt.Fprintf(&b, "═══ Summary after %.1fs (seed %d%s) ═══\n", s.Elapsed.Seconds(), s.Seed, how)
	fmt.Fprintf(&b, "Requests: %d sent · %d succeeded (%s of those not refused) · %d failed · %d refused (no healthy exit %d, origin unhealthy %d)\n",
		s.Sent, s.Successes, percent(s.Successes, attempted), sum(s.Failures), s.RefusedNoExit+s.RefusedOrigin, s.RefusedNoExit, s.RefusedOrigin)
	fmt.Fprintf(&b, "Failures by verdict class: %s\n", counted(s.Failures, " · "))

	fmt.Fprintf(&b, "\nPer exit: successful requests carried, in all and per origin; failed attempts by verdict class\n")
	fmt.Fprintf(&b, "  %-*s tier carried", exitCol+3, "exit")
	origins := s.Origins
	for _, o := range origins {
		fmt.Fprintf(&b, " %5s", o)
	}
	fmt.Fprintf(&b, "  failed\n")
	for _, e := range s.Exits {
		fmt.Fprintf(&b, "  %-*s %4d %7d", exitCol+3, e.Label, e.Tier, e.carried())
		for _, o := range origins {
			fmt.Fprintf(&b, " %5d", e.OK[o])
		}
		fmt.Fprintf(&b, "  %s\n", counted(e.Failed, ", "))
	}

	fmt.Fprintf(&b, "\nBreakers that changed state (a trip opens a breaker, a park opens it for %v, reheated = a probe succeeded and it closed)\n", parkFor)
	for _, l := range breakerLines(s) {
		fmt.Fprintf(&b, "  %s\n", l)
	}

	fmt.Fprintf(&b, "\nWhat your code saw, first of each kind (the origin appears as its address; exits by label):\n")
	for _, k := range slices.Sorted(maps.Keys(s.Examples)) {
		fmt.Fprintf(&b, "  %-16s %s\n", k, s.Examples[k])
	}

	fmt.Fprintf(&b, "\nWhat happened\n")
	for _, l := range explain(s) {
		b.WriteString(wrap(l, wrapWidth, "  • ", "    "))
	}
	io.WriteString(out, b.String())
	// The last item counts the lines printed, its own included.
	lines, leaks := out.Counts()
	last := func(total int) string {
		with, wrong := credentialed()
		text := fmt.Sprintf("Passwords: %d exits dial with credentials (%d of them wrong); none of their passwords appears in the %d lines printed.",
			with, wrong, total)
		if leaks > 0 {
			text = fmt.Sprintf("Passwords: %d of the %d lines printed contain a password. That is a bug: please report it.", leaks, total)
		}
		return wrap(text, wrapWidth, "  • ", "    ")
	}
	io.WriteString(out, last(lines+strings.Count(last(lines), "\n")))
}

// wrapWidth is where the summary's prose is wrapped.
const wrapWidth = 110

// breakerLines lists every breaker that changed state: exits first, then pairs, then origins.
func breakerLines(s summary) []string {
	var l []string
	for _, e := range s.Exits {
		if h := e.Wide; h.Parks+h.Trips > 0 {
			l = append(l, fmt.Sprintf("%-24s %s", e.Label+" (whole exit)", h.describe()))
		}
	}
	keys := slices.SortedFunc(maps.Keys(s.Pairs), func(a, b pairKey) int {
		return cmp.Or(cmp.Compare(exitIndex(a.exit), exitIndex(b.exit)), cmp.Compare(a.origin, b.origin))
	})
	for _, k := range keys {
		if h := s.Pairs[k]; h.Parks+h.Trips > 0 {
			l = append(l, fmt.Sprintf("%-24s %s", k.exit+" → "+k.origin, h.describe()))
		}
	}
	for _, o := range slices.Sorted(maps.Keys(s.Guards)) {
		l = append(l, fmt.Sprintf("%-24s %s", "origin guard "+o, s.Guards[o].describe()))
	}
	if len(l) == 0 {
		l = append(l, "none")
	}
	return l
}

func (h history) describe() string {
	var parts []string
	if h.Parks > 0 {
		parts = append(parts, fmt.Sprintf("parked %d×", h.Parks))
	}
	if h.Trips > 0 {
		parts = append(parts, fmt.Sprintf("tripped %d×", h.Trips))
	}
	d := strings.Join(parts, ", ") + " (" + counted(h.Reasons, ", ") + "), OPEN for " + waits(h.Waits)
	if h.Reheated > 0 {
		d += fmt.Sprintf("; reheated %d×", h.Reheated)
	} else {
		d += "; never reheated"
	}
	return d
}

// waits prints OPEN windows as "2.1s → 4.9s → 9.0s".
func waits(ws []time.Duration) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = fmt.Sprintf("%.1fs", w.Seconds())
	}
	return strings.Join(parts, " → ")
}

// explain says in plain words what the breakers did, from the run's own numbers.
func explain(s summary) []string {
	var l []string
	var parked, costs, classes []string
	total := 0
	for _, e := range s.Exits {
		if e.Wide.Parks > 0 {
			parked = append(parked, e.Label)
			costs = append(costs, fmt.Sprintf("%s %d", e.Label, e.Attempts))
			total += e.Attempts
			classes = append(classes, e.Label+" "+strings.Join(slices.Sorted(maps.Keys(e.Wide.Reasons)), "/"))
		}
	}
	if len(parked) > 0 {
		cost := "It cost " + plural(total, "request")
		if len(parked) > 1 {
			cost = fmt.Sprintf("Together they cost %s (%s)", plural(total, "request"), strings.Join(costs, ", "))
		}
		l = append(l, fmt.Sprintf("%s: the first failure (%s) parked the exit itself, so all %d origins dropped it at once. "+
			"%s in %.0fs: the first, then one probe each time the %v park ran out. "+
			"Not a failure per origin, and not one request in every %d as a blind pick would.",
			join(parked), strings.Join(classes, ", "), len(s.Origins), cost, s.Elapsed.Seconds(), parkFor, tier0Count(s)))
	}
	capped := s.exit(capProxy)
	if h, ok := s.Pairs[pairKey{capProxy, "shop"}]; ok && h.Trips > 0 {
		others := capped.carried() - capped.OK["shop"]
		l = append(l, fmt.Sprintf("%s → shop opened on shop's 429 and stayed OPEN for its Retry-After (%ds, plus jitter). "+
			"It tripped %d× and was reheated %d× when a probe got a page again. Its windows (%s) did not grow: "+
			"a Retry-After is the site's own answer to \"when?\", so the backoff ladder is kept for failures that give none "+
			"(see hang below). Only that pair was out: %s carried %d successful requests to the other origins meanwhile.",
			capProxy, capRetryAfter, h.Trips, h.Reheated, waits(h.Waits), capProxy, others))
	}
	hang := s.exit("hang")
	if n := hang.Failed[pool.ClassTimeout]; n > 0 {
		how := "its pair breakers opened one origin at a time, and each was probed at growing intervals instead of being waited on"
		pairTrips := 0
		for k, h := range s.Pairs {
			if k.exit == "hang" {
				pairTrips += h.Trips
			}
		}
		switch {
		case hang.Wide.Trips == 0 && pairTrips == 0:
			how = "after its first timeout for a site the pick left it out there (the slowest answer that site had seen, " +
				"so a worse bet than any other exit), too few in all to trip a breaker; it gets a trickle, to see whether it recovered"
		case hang.Wide.Trips > 0:
			how = fmt.Sprintf("once %d had piled up within %v its own exit breaker opened for every origin at once, "+
				"and it was probed after %s instead of being waited on", pool.DefaultExitSettings().FailureThreshold, window, waits(hang.Wide.Waits))
		}
		l = append(l, fmt.Sprintf("hang accepted connections and never answered. Each try ended at the %v header timeout, "+
			"not at the caller's %v (%d timeouts in all); %s.", headerTimeout, clientTimeout, n, how))
	}
	for _, e := range s.Exits {
		if e.Tier == 0 {
			continue
		}
		if c := e.carried(); c == 0 {
			l = append(l, fmt.Sprintf("%s (tier %d) carried nothing: a tier-0 exit was ready for every origin all along, so the fallback was never needed.", e.Label, e.Tier))
		} else {
			l = append(l, fmt.Sprintf("%s (tier %d) carried %d requests, at moments when no tier-0 exit was ready for an origin.", e.Label, e.Tier, c))
		}
	}
	if broken := brokenTier0(); broken > 0 {
		l = append(l, fmt.Sprintf("Picking blindly among the %d tier-0 exits, about %d requests in %d (~%d here) would have gone to a broken one; "+
			"with the breakers, %d failed.", tier0Count(s), broken, tier0Count(s), s.Sent*broken/tier0Count(s), sum(s.Failures)))
	}
	l = append(l, fmt.Sprintf("Routing: %d of %d successful responses arrived on a connection to the proxy of the exit "+
		"transport.ExitFromResponse named (checked with httptrace), over HTTP/1.1 and HTTP/2 alike: each exit has its own "+
		"*http.Transport, so HTTP/2 connections never cross exits. The origins, which learn the proxy of each request from the "+
		"proxies' Registry, saw %d requests arrive without a proxy.", s.Checked-s.Misrouted, s.Checked, s.Direct))
	return l
}

// plural returns "1 request" or "2 requests" (the unit as given for one, with an s otherwise).
func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

// join lists names as "a", "a and b", "a, b and c".
func join(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// wrap breaks text into lines of at most width runes, the first prefixed by first and the
// rest by indent.
func wrap(text string, width int, first, indent string) string {
	var b strings.Builder
	line := first
	for _, w := range strings.Fields(text) {
		if len([]rune(line))+1+len([]rune(w)) > width && line != first && line != indent {
			b.WriteString(strings.TrimRight(line, " ") + "\n")
			line = indent
		}
		if line != first && line != indent {
			line += " "
		}
		line += w
	}
	b.WriteString(line + "\n")
	return b.String()
}

func tier0Count(s summary) int {
	n := 0
	for _, e := range s.Exits {
		if e.Tier == 0 {
			n++
		}
	}
	return max(n, 1)
}

// brokenTier0 counts the tier-0 exits that can never carry a request.
func brokenTier0() int {
	n := 0
	for _, sp := range exitSpecs {
		if sp.Tier == 0 && (sp.Dead || sp.Hang || sp.WrongPass != "") {
			n++
		}
	}
	return n
}

// credentialed counts the exits that dial with credentials, and those whose password is wrong.
func credentialed() (with, wrong int) {
	for _, sp := range exitSpecs {
		if sp.User != "" {
			with++
		}
		if sp.WrongPass != "" {
			wrong++
		}
	}
	return with, wrong
}

func exitIndex(label string) int {
	return slices.IndexFunc(exitSpecs, func(sp world.ExitSpec) bool { return sp.Name == label })
}

// counted prints a tally as "a 3, b 1", largest first; "-" when empty.
func counted[K ~string](m map[K]int, sep string) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b K) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	var parts []string
	for _, k := range keys {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, sep)
}

func sum[K comparable](m map[K]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func percent(n, of int) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}

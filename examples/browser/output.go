package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

func printIntro(out io.Writer, s summary, execPath string, w *scene, cfg config) {
	fmt.Fprintf(out, "browser: %s (%s), headless; seed %d\n", s.Browser, execPath, s.Seed)
	fmt.Fprintln(out, "sites:")
	for _, o := range w.origins {
		fmt.Fprintf(out, "  %-5s %-24s %s\n", o.Name, o.URL, o.role)
	}
	fmt.Fprintln(out, "exits:")
	for _, sp := range exitSpecs {
		fmt.Fprintf(out, "  %-9s %s\n", sp.Name, sp.Role)
	}
	fmt.Fprintf(out, "\n%d pages, each in a fresh browser context whose proxy is the exit the pool picked (up to %d attempts):\n",
		cfg.Rounds*len(w.origins), cfg.Attempts)
	fmt.Fprintf(out, "  %3s  %-24s %-9s %-6s %-58s %s\n", "#", "page", "exit", "status", "verdict", "took")
}

// printAttempt prints attempt i of v: res, or the pool's refusal in v.Err.
func printAttempt(out io.Writer, v visit, i int, res Result) {
	num, page := fmt.Sprint(v.N), v.Site+" "+v.Path
	if i > 0 {
		num, page = "", "  ↳ again, another exit"
	}
	if v.Err != nil && res.Exit == "" {
		fmt.Fprintf(out, "  %3s  %-24s %-9s %-6s %s\n", num, page, "-", "-", refusal(v.Err))
		return
	}
	status := "-"
	if res.Status != 0 {
		status = fmt.Sprint(res.Status)
	}
	verdict := formatVerdict(res.Verdict)
	if res.Status == 0 && res.Err != nil {
		verdict += " (" + errText(res.Err) + ")"
	}
	fmt.Fprintf(out, "  %3s  %-24s %-9s %-6s %-58s %v\n", num, page, res.Exit, status, verdict, res.Took.Round(time.Millisecond))
}

// formatVerdict says what a verdict did: "success ok", "permanent exit proxy_auth",
// "transient blocked (cloudflare)", "transient rate_limited, retry after 30s".
func formatVerdict(v pool.Verdict) string {
	var b strings.Builder
	b.WriteString(v.Outcome.String())
	if v.Scope != pool.ScopePair {
		b.WriteString(" " + v.Scope.String())
	}
	b.WriteString(" " + string(v.Class))
	if v.Detector != "" {
		b.WriteString(" (" + v.Detector + ")")
	}
	if v.RetryAfter > 0 {
		fmt.Fprintf(&b, ", retry after %v", v.RetryAfter)
	}
	return b.String()
}

// errText is the browser's error text (net::ERR_…) without chromedp's prefix.
func errText(err error) string {
	return strings.TrimPrefix(err.Error(), "page load error ")
}

// refusal says why the pool refused a pick, without the origin's address (the page says which site).
func refusal(err error) string {
	var nh *pool.NoHealthyExitError
	var ou *pool.OriginUnhealthyError
	switch {
	case errors.As(err, &nh):
		return fmt.Sprintf("refused: no exit ready for this site, soonest probe in %v", nh.RetryIn.Round(time.Second))
	case errors.As(err, &ou):
		return fmt.Sprintf("refused: the site itself is failing, probe in %v", ou.RetryIn.Round(time.Second))
	}
	return "refused: " + err.Error()
}

// printCarried prints which exit carried what: pages loaded and failed attempts, by exit and site.
func printCarried(out io.Writer, s summary, w *scene) {
	type cell struct{ loaded, failed int }
	grid := map[[2]string]*cell{}
	for _, v := range s.Visits {
		for _, a := range v.Attempts {
			k := [2]string{a.Exit, v.Site}
			if grid[k] == nil {
				grid[k] = &cell{}
			}
			switch a.Verdict.Outcome {
			case pool.Success:
				grid[k].loaded++
			case pool.Transient, pool.Permanent:
				grid[k].failed++
			}
		}
	}
	fmt.Fprintln(out, "\nwhich exit carried what (pages loaded / attempts failed):")
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprint(tw, "  exit")
	for _, o := range w.origins {
		fmt.Fprintf(tw, "\t%s", o.Name)
	}
	fmt.Fprintln(tw)
	for _, sp := range exitSpecs {
		fmt.Fprintf(tw, "  %s", sp.Name)
		for _, o := range w.origins {
			c := grid[[2]string{sp.Name, o.Name}]
			if c == nil {
				c = &cell{}
			}
			fmt.Fprintf(tw, "\t%d / %d", c.loaded, c.failed)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// printBreakers prints the pool's breakers at the end: each exit's own, then the pairs the pool holds.
func printBreakers(out io.Writer, s summary) {
	at := s.Snapshot.At
	fmt.Fprintln(out, "\nbreakers at the end:")
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "  exit\tstate\tdetail")
	for _, e := range s.Snapshot.Exits {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", e.Exit, e.Breaker.State, breakerDetail(e.Breaker, at))
	}
	fmt.Fprintln(tw, "  exit × site\tstate\tdetail")
	for _, pr := range s.Snapshot.Pairs {
		name := s.Names[pr.Origin]
		if name == "" {
			name = pr.Origin
		}
		fmt.Fprintf(tw, "  %s × %s\t%s\t%s\n", pr.Exit, name, pr.Breaker.State, breakerDetail(pr.Breaker, at))
	}
	tw.Flush()
}

func breakerDetail(b breaker.Snapshot, at time.Time) string {
	var parts []string
	if b.Parked {
		parts = append(parts, "parked")
	}
	if b.FailuresInWindow > 0 {
		parts = append(parts, fmt.Sprintf("%d failure(s) in the window", b.FailuresInWindow))
	}
	if b.LastFailure != "" {
		parts = append(parts, "last: "+b.LastFailure)
	}
	if b.State != breaker.Closed && !b.NextProbe.IsZero() {
		parts = append(parts, fmt.Sprintf("probe in %v", b.NextProbe.Sub(at).Round(time.Second)))
	}
	return strings.Join(parts, ", ")
}

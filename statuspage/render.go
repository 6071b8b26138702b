package statuspage

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// The page is one html/template (page.html) with one inline script (live.js) and inline styles:
// no external assets, so it works on an air-gapped host and its Content-Security-Policy can forbid
// everything else. The script fetches the page anew and swaps in the element with id "live", so
// there is one renderer, this template, for the first load and every update; ?format=json is the
// machines' view and the script does not need it.

//go:embed page.html
var pageHTML string

//go:embed live.js
var liveJS string

type pageData struct {
	Title     string
	Refresh   int   // seconds, for the meta refresh of browsers without JavaScript; 0: none
	RefreshMS int64 // milliseconds between the script's fetches; 0: a static page
	Script    template.JS
	Table     Table
}

func render(w io.Writer, title string, refresh time.Duration, t Table) error {
	return page.Execute(w, pageData{Title: title, Refresh: refreshSeconds(refresh), RefreshMS: refresh.Milliseconds(),
		Script: template.JS(liveJS), Table: t})
}

func refreshSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return max(int(d.Round(time.Second)/time.Second), 1)
}

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"when":  when,
	"stamp": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"secs": func(s float64) string {
		return (time.Duration(s * float64(time.Second))).Round(time.Second).String()
	},
	"short":  short,
	"rate":   rateText,
	"bytes":  bytesText,
	"spend":  spendText,
	"word":   func(b Breaker) string { return word(true, b.State, b.Parked) },
	"cword":  cellWord,
	"cls":    func(b Breaker) string { return class(true, b.State, b.Parked) },
	"ccls":   cellClass,
	"hint":   func(class string) string { return HintFor(pool.Class(class)) },
	"tip":    cellTip,
	"redact": pool.RedactRaw,
	"trouble": func(b Breaker) bool {
		return b.Parked || b.State != breaker.Closed
	},
}).Parse(pageHTML))

func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("15:04:05 MST")
}

// bytesText is a byte count as the exits table shows it: "512 B", "1.5 KiB", "10.0 MiB".
func bytesText(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

// spendText is a spend as the exits table shows it, in the pool's currency-free cost unit: four
// decimals ("0.0123"), two from 1,000 on; "–" for none.
func spendText(v float64) string {
	switch {
	case v == 0:
		return "–"
	case v >= 1000:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.4f", v)
}

// short is a duration in seconds as the grid's cells show it: "45s", "15m", "2h5m".
func short(s float64) string {
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		if d%time.Minute == 0 || d >= 10*time.Minute {
			return fmt.Sprintf("%dm", int(d.Round(time.Minute)/time.Minute))
		}
		return fmt.Sprintf("%dm%ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	}
	d = d.Round(time.Minute)
	if d%time.Hour == 0 {
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dh%dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

// rateText is a pair's rate, or "—" when it has none: no limit.
func rateText(r float64) string {
	if finiteRate(r) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.3g/s", r)
}

// word is a breaker's state in the page's words.
func word(tracked bool, s breaker.State, parked bool) string {
	switch {
	case !tracked:
		return "·"
	case parked:
		return "parked"
	case s == breaker.Open:
		return "open"
	case s == breaker.HalfOpen:
		return "probing"
	}
	return "ok"
}

// class is a breaker's CSS class: its colour.
func class(tracked bool, s breaker.State, parked bool) string {
	switch {
	case !tracked:
		return "none"
	case parked:
		return "parked"
	}
	return s.String()
}

// heldByGuard reports whether cell c, in column o, is a pair whose breaker is CLOSED while its
// origin's guard is not: the pair says "ok", but no request goes to the origin through any exit.
func heldByGuard(c Cell, o GridOrigin) bool {
	return c.Tracked && !c.Parked && c.State == breaker.Closed && o.Guard != breaker.Closed
}

// cellWord is a grid cell's state in the page's words: the guard's for a pair it holds.
func cellWord(c Cell, o GridOrigin) string {
	if heldByGuard(c, o) {
		return "guard " + word(true, o.Guard, false)
	}
	return word(c.Tracked, c.State, c.Parked)
}

// cellClass is a grid cell's CSS class: the guard's colour for a pair it holds (as the column's
// header has), else the pair's.
func cellClass(c Cell, o GridOrigin) string {
	if heldByGuard(c, o) {
		return "guard-" + o.Guard.String()
	}
	return class(c.Tracked, c.State, c.Parked)
}

// cellTip is a cell's tooltip: the pair, its state and what to do.
func cellTip(r GridRow, o GridOrigin, c Cell) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s × %s: ", r.Display, o.Origin)
	switch {
	case !c.Tracked:
		b.WriteString("no breaker (no failure lately)")
	case heldByGuard(c, o):
		fmt.Fprintf(&b, "closed, but the origin's guard is %s: picks for the origin fail fast through every exit", o.Guard)
	case c.State == breaker.Open:
		fmt.Fprintf(&b, "%s, next probe in %s", word(true, c.State, c.Parked), short(c.NextProbeIn))
	case c.State == breaker.HalfOpen:
		b.WriteString("half-open, probing")
	default:
		fmt.Fprintf(&b, "closed, %d failure%s in the window", c.FailuresInWindow, plural(c.FailuresInWindow))
	}
	if c.LastFailure != "" {
		fmt.Fprintf(&b, "; last failure %s", c.LastFailure)
		if h := HintFor(pool.Class(c.LastFailure)); h != "" && c.State != breaker.Closed {
			fmt.Fprintf(&b, ": %s", h)
		}
	}
	fmt.Fprintf(&b, "; rate %s", rateText(c.Rate))
	if r.Status == StatusDown {
		b.WriteString("; the exit itself is down")
	}
	return b.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

package statuspage_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/statuspage"
)

// colourSnapshot has an exit of each status and an origin whose guard is OPEN, through which a
// healthy exit's pair is CLOSED with an origin_5xx as its last failure.
var colourSnapshot = pool.Snapshot{
	At: t0,
	Exits: []pool.ExitStatus{
		{Exit: "healthy", Weight: 1},
		{Exit: "degraded", Weight: 1},
		{Exit: "down", Weight: 1, Breaker: open(30*time.Second, false, 1, "timeout")},
		{Exit: "parked", Weight: 1, Breaker: open(15*time.Minute, true, 1, "proxy_auth")},
	},
	Pairs: []pool.PairStatus{
		{Exit: "degraded", Origin: "shop.example", Breaker: open(20*time.Second, false, 1, "rate_limited")},
		{Exit: "healthy", Origin: "down.example", Breaker: breaker.Snapshot{State: breaker.Closed, LastFailure: "origin_5xx"}},
		{Exit: "degraded", Origin: "down.example", Breaker: open(20*time.Second, false, 1, "timeout")},
	},
	Origins: []pool.OriginStatus{{Origin: "down.example", Breaker: open(10*time.Second, false, 1, "origin_5xx")}},
}

// Regression: the Exits table coloured each row by the exit's own breaker, so a degraded exit
// (own breaker CLOSED, pairs OPEN) was drawn green beside a status that says "degraded" (orange
// in the grid and the overview); and a CLOSED pair under an origin whose guard is OPEN read
// "ok · origin_5xx", in green. The page is parsed as the real handler renders it.
func TestRenderedClassesFollowTheStatus(t *testing.T) {
	h, err := statuspage.New(fixed(colourSnapshot))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(strings.NewReader(get(t, h, "/")))
	if err != nil {
		t.Fatal(err)
	}

	// The Exits table: each row has the classes of its status, and no breaker state's colour.
	rows := map[string][]string{}
	for tr := range find(doc, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-exit") != "" && inSection(n, "exits") }) {
		rows[attr(tr, "data-exit")] = strings.Fields(attr(tr, "class"))
	}
	for exit, want := range map[string]string{"healthy": statuspage.StatusHealthy, "degraded": statuspage.StatusDegraded,
		"down": statuspage.StatusDown, "parked": statuspage.StatusDown} {
		cls, ok := rows[exit]
		if !ok {
			t.Errorf("Exits table: no row for %q (rows %v)", exit, rows)
			continue
		}
		if !slices.Contains(cls, "status") || !slices.Contains(cls, want) {
			t.Errorf("Exits table row %q: class %q, want status %s", exit, cls, want)
		}
		for _, state := range []string{"closed", "open", "half_open", "parked"} {
			if slices.Contains(cls, state) {
				t.Errorf("Exits table row %q: class %q has the breaker colour %q, not the status's", exit, cls, state)
			}
		}
	}

	// The grid: the column of down.example, whose guard is OPEN.
	var cols []string
	for th := range find(doc, func(n *html.Node) bool { return n.Data == "th" && strings.Contains(attr(n, "class"), "origin") }) {
		cols = append(cols, attr(th, "class"))
	}
	down := slices.IndexFunc(cols, func(c string) bool { return slices.Contains(strings.Fields(c), "guard-open") })
	if down < 0 {
		t.Fatalf("grid: no column with class guard-open among %q", cols)
	}
	cells := map[string]*html.Node{}
	for tr := range find(doc, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-exit") != "" && inSection(n, "grid") }) {
		var tds []*html.Node
		for td := range find(tr, func(n *html.Node) bool { return n.Data == "td" && strings.Contains(attr(n, "class"), "cell") }) {
			tds = append(tds, td)
		}
		if down < len(tds) {
			cells[attr(tr, "data-exit")] = tds[down]
		}
	}
	for exit, want := range map[string]struct{ class, text string }{
		"healthy":  {"guard-open", "guard open"}, // CLOSED, but the guard holds it
		"degraded": {"open", "open"},             // its own state, more specific than the guard's
		"down":     {"none", "·"},                // no breaker for the pair
	} {
		td, ok := cells[exit]
		if !ok {
			t.Errorf("grid: no down.example cell for %q", exit)
			continue
		}
		cls, text := strings.Fields(attr(td, "class")), textOf(td)
		if !slices.Contains(cls, want.class) || !strings.HasPrefix(text, want.text) {
			t.Errorf("grid %s × down.example: class %q, text %q; want class %s, text starting %q", exit, cls, text, want.class, want.text)
		}
		if slices.Contains(cls, "closed") || strings.HasPrefix(text, "ok") {
			t.Errorf("grid %s × down.example: class %q, text %q: drawn ok under an open guard", exit, cls, text)
		}
	}
}

// find yields the elements under n for which match is true, in document order.
func find(n *html.Node, match func(*html.Node) bool) func(func(*html.Node) bool) {
	return func(yield func(*html.Node) bool) {
		for d := range n.Descendants() {
			if d.Type == html.ElementNode && match(d) && !yield(d) {
				return
			}
		}
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// inSection reports whether n is inside the <section id="id">.
func inSection(n *html.Node, id string) bool {
	for p := n.Parent; p != nil; p = p.Parent {
		if p.Data == "section" && attr(p, "id") == id {
			return true
		}
	}
	return false
}

func textOf(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return strings.TrimSpace(b.String())
}

package statuspage_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/statuspage"
)

// TestExitsShowSpend: each exit's row shows what it cost, four decimals, the exact figure in its
// title, a dash when it cost nothing; the JSON carries the figure.
func TestExitsShowSpend(t *testing.T) {
	snap := pool.Snapshot{At: t0, Exits: []pool.ExitStatus{
		{Exit: "priced", Weight: 1, Spend: 0.012345, Bytes: pool.Traffic{Sent: 10, Received: 20}},
		{Exit: "dear", Weight: 1, Spend: 1234.5678},
		{Exit: "free", Weight: 1},
	}}
	h, err := statuspage.New(fixed(snap))
	if err != nil {
		t.Fatal(err)
	}
	cells := exitCells(t, h)
	for exit, want := range map[string]string{"priced": "0.0123|0.012345", "dear": "1234.57|1234.5678", "free": "–|0"} {
		got := cells[exit]
		if len(got) < 3 || got[len(got)-3] != want {
			t.Errorf("Exits table, %s: cells %q, want the spend %q third from last", exit, got, want)
		}
	}
	var tab statuspage.Table
	if err := json.Unmarshal([]byte(get(t, h, "/?format=json")), &tab); err != nil {
		t.Fatal(err)
	}
	for _, e := range tab.Exits {
		for _, s := range snap.Exits {
			if e.Exit == s.Exit && e.Spend != s.Spend {
				t.Errorf("JSON exits[%s].spend = %v, want %v", e.Exit, e.Spend, s.Spend)
			}
		}
	}
}

// exitCells returns the cells of each exit's row in h's exits table, by exit, as "text|title".
func exitCells(t *testing.T, h http.Handler) map[string][]string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(get(t, h, "/")))
	if err != nil {
		t.Fatal(err)
	}
	cells := map[string][]string{}
	for tr := range find(doc, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-exit") != "" && inSection(n, "exits") }) {
		for td := range find(tr, func(n *html.Node) bool { return n.Data == "td" }) {
			cells[attr(tr, "data-exit")] = append(cells[attr(tr, "data-exit")], textOf(td)+"|"+attr(td, "title"))
		}
	}
	return cells
}

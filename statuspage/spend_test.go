package statuspage_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

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

// TestBudgetsShown: the pool's tier budgets appear on the page, a spent one marked open, and in
// the JSON.
func TestBudgetsShown(t *testing.T) {
	renews := t0.Add(time.Hour)
	snap := pool.Snapshot{At: t0, Exits: []pool.ExitStatus{{Exit: "x", Weight: 1}}, Budgets: []pool.BudgetStatus{
		{Tier: 1, Name: "tier-1-spend-1h0m0s", Spend: 50, Left: 0, Renews: renews},
		{Tier: 1, Name: "tier-1-bytes-1h0m0s", Bytes: 1 << 20, Left: 4096, Renews: renews},
	}}
	h, err := statuspage.New(fixed(snap))
	if err != nil {
		t.Fatal(err)
	}
	page := get(t, h, "/")
	for _, want := range []string{
		`<tr class="open" data-budget="tier-1-spend-1h0m0s"><td class="num">1</td><td>tier-1-spend-1h0m0s</td><td class="num">50</td><td class="num">0.0000</td>`,
		`<tr class="closed" data-budget="tier-1-bytes-1h0m0s"><td class="num">1</td><td>tier-1-bytes-1h0m0s</td><td class="num">1.0 MiB</td><td class="num">4096 B</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	var tab statuspage.Table
	if err := json.Unmarshal([]byte(get(t, h, "/?format=json")), &tab); err != nil {
		t.Fatal(err)
	}
	if len(tab.Budgets) != 2 || tab.Budgets[0].Name != "tier-1-spend-1h0m0s" || !tab.Budgets[1].Renews.Equal(renews) {
		t.Errorf("JSON budgets = %+v, want the snapshot's two", tab.Budgets)
	}
}

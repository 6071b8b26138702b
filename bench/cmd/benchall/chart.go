package main

import (
	"fmt"
	"html"
	"strings"

	"github.com/proxybreaker/proxybreaker/bench/sim"
)

// svg draws goodput and wasted attempts, both ÷ the informed oracle's goodput (ms[len(ms)-2], the
// clairvoyant oracle being last), per strategy as paired bars.
func svg(what string, ms []sim.Metrics) string {
	oracle := float64(ms[len(ms)-2].Successes)
	const w, rowH, left, barW = 760, 44, 250, 440
	h := 60 + rowH*len(ms) + 30
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14" font-weight="bold">Pool simulation (%s): goodput and wasted attempts ÷ the informed oracle's goodput</text>`+"\n", html.EscapeString(what))
	fmt.Fprintf(&b, `<rect x="%d" y="30" width="12" height="12" fill="#2b8a3e"/><text x="%d" y="40">goodput</text>`, left, left+16)
	fmt.Fprintf(&b, `<rect x="%d" y="30" width="12" height="12" fill="#c92a2a"/><text x="%d" y="40">wasted attempts</text>`+"\n", left+90, left+106)
	for i, m := range ms {
		y := 55 + i*rowH
		g := float64(m.Successes) / oracle
		x := float64(m.Wasted()) / oracle
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-8, y+18, html.EscapeString(m.Strategy))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="16" fill="#2b8a3e"/><text x="%.1f" y="%d">%.2f</text>`+"\n", left, y, barW*min(g, 1.2)/1.2, float64(left)+barW*min(g, 1.2)/1.2+4, y+12, g)
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="16" fill="#c92a2a"/><text x="%.1f" y="%d">%.2f</text>`+"\n", left, y+18, barW*min(x, 1.2)/1.2, float64(left)+barW*min(x, 1.2)/1.2+4, y+30, x)
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="50" x2="%d" y2="%d" stroke="#888" stroke-dasharray="4"/><text x="%d" y="%d" fill="#666">informed oracle = 1.0</text>`+"\n",
		left+barW*10/12, left+barW*10/12, h-25, left+barW*10/12-50, h-10)
	b.WriteString("</svg>\n")
	return b.String()
}

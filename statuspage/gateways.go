package statuspage

import (
	"github.com/proxybreaker/proxybreaker/pool"
)

// GatewayRow is one provider gateway (pool.GatewayStatus): its own breaker, which every session's
// exit breaker is, and its live sessions by label — never a minted session id.
type GatewayRow struct {
	Gateway string `json:"gateway"`
	Breaker
	Sessions   []string          `json:"sessions"`
	SessionTTL float64           `json:"session_ttl_seconds,omitempty"`
	Rotate     bool              `json:"rotate"`
	Rotations  map[string]uint64 `json:"rotations,omitempty"` // sessions replaced, by reason
}

// gatewayRows turns the snapshot's gateways into rows, in the snapshot's order (by label).
func gatewayRows(s pool.Snapshot) []GatewayRow {
	rows := []GatewayRow{}
	for _, g := range s.Gateways {
		rows = append(rows, GatewayRow{Gateway: g.Gateway, Breaker: view(g.Breaker, s.At), Sessions: g.Sessions,
			SessionTTL: g.SessionTTL.Seconds(), Rotate: g.Rotate, Rotations: g.Rotations})
	}
	return rows
}

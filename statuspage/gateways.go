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
	// Live is each live session as the Exits table shows it, in the order of Sessions: the page
	// groups them under their gateway.
	Live []GatewaySession `json:"live_sessions"`
}

// GatewaySession is one live session of a gateway: its label ("res#5", the gateway's label and a
// number never reused; never its minted id), its status, the pairs it has out of CLOSED, what is
// in flight through it and what it carried.
type GatewaySession struct {
	Session  string       `json:"session"`
	Status   string       `json:"status"`
	InFlight int          `json:"in_flight"`
	Pairs    int          `json:"pairs_out"` // its pairs open or probing, all origins
	Bytes    pool.Traffic `json:"bytes"`
}

// gatewayRows turns the snapshot's gateways into rows, in the snapshot's order (by label), each
// with its sessions' rows from exits.
func gatewayRows(s pool.Snapshot, exits []ExitRow) []GatewayRow {
	rows := []GatewayRow{}
	if len(s.Gateways) == 0 {
		return rows
	}
	byLabel := make(map[string]*ExitRow, len(exits))
	for i := range exits {
		byLabel[exits[i].Exit] = &exits[i]
	}
	for _, g := range s.Gateways {
		row := GatewayRow{Gateway: g.Gateway, Breaker: view(g.Breaker, s.At), Sessions: g.Sessions,
			SessionTTL: g.SessionTTL.Seconds(), Rotate: g.Rotate, Rotations: g.Rotations, Live: []GatewaySession{}}
		for _, label := range g.Sessions {
			gs := GatewaySession{Session: label}
			if e := byLabel[label]; e != nil {
				gs.Status, gs.InFlight, gs.Pairs, gs.Bytes = e.Status, e.InFlight, e.PairsOpen+e.PairsHalfOpen, e.Bytes
			}
			row.Live = append(row.Live, gs)
		}
		rows = append(rows, row)
	}
	return rows
}

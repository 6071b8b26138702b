package statuspage_test

import (
	"encoding/json"
	"testing"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/statuspage"
)

// TestExitsShowBytes: each exit's row shows the bytes it sent and received, readable, with the
// exact count in its title; the JSON carries the counts.
func TestExitsShowBytes(t *testing.T) {
	snap := pool.Snapshot{At: t0, Exits: []pool.ExitStatus{
		{Exit: "busy", Weight: 1, Bytes: pool.Traffic{Sent: 1536, Received: 10 << 20}},
		{Exit: "idle", Weight: 1},
	}}
	h, err := statuspage.New(fixed(snap))
	if err != nil {
		t.Fatal(err)
	}
	cells := exitCells(t, h)
	for exit, want := range map[string][]string{
		"busy": {"1.5 KiB|1536 bytes", "10.0 MiB|10485760 bytes"},
		"idle": {"0 B|0 bytes", "0 B|0 bytes"},
	} {
		got := cells[exit]
		if len(got) < 2 || got[len(got)-2] != want[0] || got[len(got)-1] != want[1] {
			t.Errorf("Exits table, %s: last cells %q, want sent and received %q", exit, got, want)
		}
	}

	var tab statuspage.Table
	if err := json.Unmarshal([]byte(get(t, h, "/?format=json")), &tab); err != nil {
		t.Fatal(err)
	}
	for _, e := range tab.Exits {
		if e.Exit == "busy" && e.Bytes != snap.Exits[0].Bytes {
			t.Errorf("JSON exits[busy].bytes = %+v, want %+v", e.Bytes, snap.Exits[0].Bytes)
		}
	}
}

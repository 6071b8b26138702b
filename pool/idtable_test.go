package pool

import "testing"

// TestBitTableChunksAcrossTheArena sets bits in many chunks of one table (its first allocated on
// its own, the rest from bitArena) and checks each bit reads back alone.
func TestBitTableChunksAcrossTheArena(t *testing.T) {
	var a, b bitTable
	const chunks = 70 // more than the arena's first block
	for c := range uint32(chunks) {
		a.set(c*chunkSize+c, true)
		b.set(c*chunkSize+c+1, true)
	}
	for c := range uint32(chunks) {
		id := c*chunkSize + c
		if !a.get(id) || a.get(id+1) || b.get(id) || !b.get(id+1) {
			t.Fatalf("chunk %d: a(%d)=%v a(%d)=%v b(%d)=%v b(%d)=%v; want each table's own bit alone",
				c, id, a.get(id), id+1, a.get(id+1), id, b.get(id), id+1, b.get(id+1))
		}
	}
	a.set(5*chunkSize+5, false)
	if a.get(5*chunkSize+5) || !a.get(6*chunkSize+6) {
		t.Fatal("clearing one bit moved another")
	}
}

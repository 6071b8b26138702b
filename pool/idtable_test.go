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

// TestBitTableDirectoryGrowsAndMoves sets bits in chunks in an order that makes the directory grow
// in place, move to dirArena and grow there, and checks every bit set so far after each step.
func TestBitTableDirectoryGrowsAndMoves(t *testing.T) {
	var tb bitTable
	order := []uint32{12, 3, 12, 40, 0, 24, 100, 41} // chunk indices; 12 again: a second bit
	var set []uint32
	for step, c := range order {
		id := c*chunkSize + uint32(step)
		tb.set(id, true)
		set = append(set, id)
		for _, want := range set {
			if !tb.get(want) {
				t.Fatalf("step %d: get(%d) = false after set, want true", step, want)
			}
		}
		if tb.get(id+1) || tb.get(c*chunkSize+chunkSize-1) || tb.get(200*chunkSize) {
			t.Fatalf("step %d: a bit never set reads true", step)
		}
	}
	for _, id := range set {
		tb.set(id, false)
		if tb.get(id) {
			t.Fatalf("get(%d) = true after clearing", id)
		}
	}
}

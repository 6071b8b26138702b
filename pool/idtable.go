package pool

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Exits are numbered by id, densely, in the order they were added. The tables below keep one
// small value per exit id in fixed chunks that never move once allocated, so the picker reads
// them with plain atomic loads — no lock, no map, no pointer into a struct another core is writing —
// and a pick at 100,000 exits touches a few cache lines instead of a few exit structs.

const (
	chunkShift = 12 // 4,096 ids per chunk
	chunkSize  = 1 << chunkShift
	chunkMask  = chunkSize - 1
)

// bitTable is one bit per exit id, all clear until set. Chunks are allocated on the first set bit
// in them, so a table that marks a few ids among 100,000 costs a few hundred bytes.
//
// A reader reaches a chunk in two loads: the table holds its directory's first entry and length
// (no slice header between), and the directory of a table past its first chunk lies with the
// other dense tables' in dirArena, not among the pairs. At 100,000 exits × 1,000 origins each
// load on the way from an origin to a pair bit missed the cache (most likely the TLB too), one
// after the other.
type bitTable struct {
	// n is how many entries of dir readers may look at; dir is published before n grows, so a
	// reader that loads n and then dir has a directory at least n long. A directory holds
	// dirCap(n) entries: below that, entries are set in place; past it, the directory is copied
	// into a longer one. Writers hold bitTablesMu.
	n   atomic.Uint32
	dir atomic.Pointer[atomic.Pointer[bitChunk]]
}

// bitTablesMu serialises chunk allocation in every bit table: it happens once per chunk of a
// table's life, and a lock of its own would make each of an origin's tables 8 bytes larger.
var bitTablesMu sync.Mutex

// dirCap is the capacity of a directory of n entries: n rounded up to a power of two.
func dirCap(n int) int { return 1 << bits.Len(uint(n-1)) }

type bitChunk = [chunkSize / 64]atomic.Uint64

// chunks returns the table's directory.
func (t *bitTable) chunks() []atomic.Pointer[bitChunk] {
	n := t.n.Load()
	if n == 0 {
		return nil
	}
	return unsafe.Slice(t.dir.Load(), n)
}

// get reports id's bit. Most tables a pick reads are empty (no exit removed, none out of CLOSED,
// none paced): that answer is inlined into the caller, one load; the rest is getIn's.
func (t *bitTable) get(id uint32) bool {
	n := t.n.Load()
	return n != 0 && t.getIn(n, id)
}

// getIn is get for a table whose directory holds n entries (n loaded before the directory). It
// is kept out of line so that get, which calls it, is inlined.
//
//go:noinline
func (t *bitTable) getIn(n, id uint32) bool {
	ci := id >> chunkShift
	if ci >= n {
		return false
	}
	c := (*atomic.Pointer[bitChunk])(unsafe.Add(unsafe.Pointer(t.dir.Load()), uintptr(ci)*unsafe.Sizeof(atomic.Pointer[bitChunk]{}))).Load()
	return c != nil && c[(id&chunkMask)/64].Load()&(1<<(id%64)) != 0
}

// touch loads the words of a and b, to bring them into the cache together; the result means
// nothing.
func (t *bitTable) touch(a, b uint32) bool { return t.get(a) != t.get(b) }

func (t *bitTable) set(id uint32, v bool) {
	c := t.chunk(id, v)
	if c == nil {
		return // clearing a bit in a chunk that was never allocated
	}
	w, bit := &c[(id&chunkMask)/64], uint64(1)<<(id%64)
	if v {
		w.Or(bit)
	} else {
		w.And(^bit)
	}
}

// chunk returns the chunk holding id, allocating it (and the directory) if create.
func (t *bitTable) chunk(id uint32, create bool) *bitChunk {
	ci := int(id >> chunkShift)
	if dir := t.chunks(); ci < len(dir) {
		if c := dir[ci].Load(); c != nil {
			return c
		}
	}
	if !create {
		return nil
	}
	bitTablesMu.Lock()
	defer bitTablesMu.Unlock()
	dir := t.chunks()
	if ci < len(dir) {
		if c := dir[ci].Load(); c != nil {
			return c
		}
	}
	// Chunks are never freed: with one chunk the directory is still the first chunk's own, and
	// the second moves it to dirArena; with more it is there already.
	have := 0
	for i := range dir {
		if dir[i].Load() != nil {
			have++
		}
	}
	dense := have > 0 // a second chunk: a dense table, read at every pick
	n := max(ci+1, len(dir))
	if len(dir) == 0 || ci >= dirCap(len(dir)) || have == 1 {
		var grown []atomic.Pointer[bitChunk]
		if dense {
			grown = dirArena.dir(dirCap(n))
		} else {
			grown = make([]atomic.Pointer[bitChunk], dirCap(n)) // the first chunk's: a table of a few ids
		}
		for i := range dir {
			grown[i].Store(dir[i].Load())
		}
		t.dir.Store(&grown[0])
	}
	var c *bitChunk
	if dense {
		c = bitArena.chunk()
	} else {
		c = new(bitChunk)
	}
	unsafe.Slice(t.dir.Load(), dirCap(n))[ci].Store(c)
	if ci >= len(dir) {
		t.n.Store(uint32(ci + 1)) // after the entry and the directory: readers load n first
	}
	return c
}

// dirArena hands out the directories of bit tables past their first chunk, as bitArena does
// their chunks, so that the directories read at every pick lie together in a few pages.
var dirArena dirBlocks

// dirBlocks is a bump allocator of directories, in blocks of 4,096 entries (32 KB).
type dirBlocks struct {
	mu    sync.Mutex
	block []atomic.Pointer[bitChunk]
}

func (a *dirBlocks) dir(n int) []atomic.Pointer[bitChunk] {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.block) < n {
		a.block = make([]atomic.Pointer[bitChunk], max(n, 4096))
	}
	d := a.block[:n:n]
	a.block = a.block[n:]
	return d
}

// bitArena hands out the chunks of bit tables that grow past their first chunk — the pair bits
// of an origin with many pairs out of CLOSED, read for every candidate of every pick — from large
// contiguous blocks rather than one allocation each. At 100,000 exits × 1,000 origins, 512-byte
// chunks allocated one by one lie scattered through gigabytes of pairs, and a pick's loads of them
// miss the TLB as well as the cache; packed together they cost a tenth less a pick
// (BenchmarkPick). A table's first chunk is allocated on its own, so that the many origins with a
// pair or two out of CLOSED (an origin seen once, a churn of origins) hold no block alive: a
// block stays alive while any of its chunks does, which only tables of many chunks can cause.
var bitArena chunkArena

// chunkArena is a bump allocator of bit-table chunks, in blocks that double from 64 chunks (32 KB)
// to 4,096 (2 MB).
type chunkArena struct {
	mu    sync.Mutex
	block []bitChunk
	size  int
}

func (a *chunkArena) chunk() *bitChunk {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.block) == 0 {
		a.size = min(max(2*a.size, 64), 4096)
		a.block = make([]bitChunk, a.size)
	}
	c := &a.block[0]
	a.block = a.block[1:]
	return c
}

// counterTable is one int32 counter per exit id, made with the id (make).
type counterTable struct {
	mu  sync.Mutex
	dir atomic.Pointer[[]*[chunkSize]atomic.Int32]
}

func (t *counterTable) get(id uint32) int32 {
	dir := t.dir.Load()
	if dir == nil || int(id>>chunkShift) >= len(*dir) {
		return 0
	}
	if c := (*dir)[id>>chunkShift]; c != nil {
		return c[id&chunkMask].Load()
	}
	return 0
}

// add adds d to id's counter, which make has made: one load, two indexes, the addition, all
// inlined into the pick.
func (t *counterTable) add(id uint32, d int32) {
	(*t.dir.Load())[id>>chunkShift][id&chunkMask].Add(d)
}

// make makes the counter of id (an exit's, as its id is minted), zero. Writers are serialised by
// t.mu; readers see a directory that is never written once stored.
func (t *counterTable) make(id uint32) {
	ci := int(id >> chunkShift)
	t.mu.Lock()
	defer t.mu.Unlock()
	var dir []*[chunkSize]atomic.Int32
	if d := t.dir.Load(); d != nil {
		dir = *d
	}
	if ci < len(dir) && dir[ci] != nil {
		return
	}
	grown := make([]*[chunkSize]atomic.Int32, max(len(dir), ci+1))
	copy(grown, dir)
	grown[ci] = new([chunkSize]atomic.Int32)
	t.dir.Store(&grown)
}

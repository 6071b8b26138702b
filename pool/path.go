package pool

// PathOf returns the 16-bit mark of a request path that Lease.SetPath keeps: FNV-1a of path,
// folded to 16 bits, never 0 (0 says "unknown"). Only equality means anything: a plain 403 for
// a path the origin served moments before is judged a ban (SuspectEvidence). It does not allocate.
func PathOf(path string) uint16 {
	h := uint32(2166136261)
	for i := 0; i < len(path); i++ {
		h ^= uint32(path[i])
		h *= 16777619
	}
	m := uint16(h>>16) ^ uint16(h)
	if m == 0 {
		m = 1
	}
	return m
}

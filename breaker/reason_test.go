package breaker

import "testing"

// TestReasonSharesCopies: the same reason gets the same copy, and a failure whose reason has been
// seen allocates nothing.
func TestReasonSharesCopies(t *testing.T) {
	a, b := reason("rate_limited"), reason("rate_"+string([]byte("limited")))
	if a != b || *a != "rate_limited" {
		t.Fatalf("reason copies %p %q and %p %q; want one shared copy", a, *a, b, *b)
	}
	if n := testing.AllocsPerRun(100, func() { reason("rate_limited") }); n != 0 {
		t.Errorf("a known reason costs %v allocations, want 0", n)
	}
}

package pool

import (
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// TestOriginStateHotLines keeps the fields every pick reads in the few cache lines originState's
// comment names: at 1,000 origins each line of the state a pick touches is a cache miss, and a
// field added in the wrong place would silently cost one more per pick.
func TestOriginStateHotLines(t *testing.T) {
	// Where a state starts within its cache line: the allocation's size class is a multiple of
	// 64 bytes, and the runtime puts an 8-byte header before an object this large that holds
	// pointers, so every state starts at the same offset in a line.
	p, err := New(WithExits(MustParseExit("10.0.0.1:80")))
	if err != nil {
		t.Fatal(err)
	}
	var o originState
	base := uintptr(unsafe.Pointer(p.origin("o0.example"))) % 64
	for i := 1; i < 50; i++ {
		if s := p.origin(fmt.Sprintf("o%d.example", i)); uintptr(unsafe.Pointer(s))%64 != base {
			t.Fatalf("origin state at %p, another at offset %d in its line: not every state starts alike (size %d)", s, base, unsafe.Sizeof(o))
		}
	}
	line := func(off uintptr) uintptr { return (base + off) / 64 }

	lineOf := map[string]uintptr{}
	for name, off := range map[string]uintptr{
		"dead":           unsafe.Offsetof(o.dead),
		"epoch":          unsafe.Offsetof(o.epoch),
		"bucket":         unsafe.Offsetof(o.bucket),
		"limits":         unsafe.Offsetof(o.limits),
		"eager":          unsafe.Offsetof(o.eager),
		"open":           unsafe.Offsetof(o.open),
		"limited":        unsafe.Offsetof(o.limited),
		"guard.cfg":      unsafe.Offsetof(o.guard) + unsafe.Offsetof(o.guard.cfg),
		"guard.b.word":   unsafe.Offsetof(o.guard) + unsafe.Offsetof(o.guard.b) + breakerWordOffset(),
		"due.min":        unsafe.Offsetof(o.due) + unsafe.Offsetof(o.due.min),
		"kin.held":       unsafe.Offsetof(o.kin) + unsafe.Offsetof(o.kin.held),
		"lat.tracked":    unsafe.Offsetof(o.lat) + unsafe.Offsetof(o.lat.tracked),
		"limited.dir":    unsafe.Offsetof(o.limited) + unsafe.Offsetof(o.limited.dir),
		"lat.tracked(e)": unsafe.Offsetof(o.lat) + unsafe.Offsetof(o.lat.tracked) + 7,
	} {
		lineOf[name] = line(off)
	}
	lines := map[uintptr][]string{}
	for name, l := range lineOf {
		lines[l] = append(lines[l], name)
	}
	// Every field a pick reads, whatever its origin's state, in three lines (and one of load).
	if len(lines) > 3 {
		t.Errorf("a pick's fields of originState span %d cache lines, want at most 3: %v", len(lines), lines)
	}
}

// breakerWordOffset is the offset of breaker.Breaker's word, the state a lock-free CLOSED permit
// reads.
func breakerWordOffset() uintptr {
	f, ok := reflect.TypeFor[breaker.Breaker]().FieldByName("word")
	if !ok {
		panic("breaker.Breaker has no field word")
	}
	return f.Offset
}

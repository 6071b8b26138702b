// Package statuspage serves an operator's view of a pool's breakers: which exits are parked or
// cooling, which (exit, origin) pairs are open and when they will be probed, which origins the
// guard holds down, and the last failure behind each.
//
//	operator's browser or curl → statuspage.Handler → Pool.Snapshot() → Table → HTML or JSON
//
// Mount it on a loopback or otherwise private listener:
//
//	h, err := statuspage.New(p, statuspage.WithRefresh(5*time.Second)) // p is the *pool.Pool
//	mux.Handle("/breakers", h)
//
// The HTML page is rendered by html/template, so labels and origins are escaped; ask for JSON with
// ?format=json or "Accept: application/json". Exits are parked first, then OPEN, HALF_OPEN and
// CLOSED; pairs of parked exits come first. Nothing on the page or in the JSON can hold a
// credential: exits appear by label, failures by class.
package statuspage

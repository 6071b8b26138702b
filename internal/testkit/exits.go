package testkit

import (
	"fmt"

	"github.com/proxybreaker/proxybreaker/pool"
)

// Exits returns n exits labelled prefix0 … prefix(n-1), exit i dialing http://user<i>:pw-<i>@ an
// address in 10.0.0.0/8 on port 3128, so that tests can check that no credential ("user<i>:",
// "pw-<i>") leaks into errors, logs or snapshots. The addresses are never dialled: they are for a
// base that answers without a network (Canned, Scripted). n may be up to about 15 million.
func Exits(prefix string, n int) []*pool.Exit {
	out := make([]*pool.Exit, n)
	for i := range out {
		// 10.1.0.1, 10.1.0.2, … 10.1.0.250, 10.1.1.1, …: 62,500 exits per second octet.
		host := fmt.Sprintf("10.%d.%d.%d", 1+i/62500, i/250%250, i%250+1)
		out[i] = pool.MustParseExit(fmt.Sprintf("http://user%d:pw-%d@%s:3128", i, i, host)).
			WithLabel(fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

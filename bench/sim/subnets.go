package sim

import (
	"fmt"

	"github.com/proxybreaker/proxybreaker/pool"
)

// subnetExits returns env's exits as the pool would see them in a world where exits share
// subnets (Scenario.Subnet): each exit of subnet s dials an IPv4 literal in 198.18.0.0/15 whose
// /24 is its subnet's, so the pool groups the subnet's exits by itself (pool.Exit.Group), as it
// would a provider's list of addresses (up to 512 subnets). Exits in no subnet keep their loopback address, which the
// pool groups with nothing; so do all exits of a world without subnets. Labels are kept.
func subnetExits(env *Env) ([]*pool.Exit, error) {
	out := make([]*pool.Exit, len(env.Exits))
	seen := map[int]int{} // members so far, by subnet
	for e, x := range env.Exits {
		s := env.Truth.Subnet(e)
		if s < 0 {
			out[e] = x
			continue
		}
		seen[s]++
		a, err := pool.ParseExit(fmt.Sprintf("http://198.%d.%d.%d:%d", 18+s>>8&1, s&255, seen[s], 20000+e))
		if err != nil {
			return nil, err
		}
		out[e] = a.WithLabel(x.Label())
	}
	return out, nil
}

package pool_test

import (
	"fmt"
	"strings"

	"github.com/proxybreaker/proxybreaker/pool"
)

// A proxy list in the forms providers hand out, with optional label, tier and weight attributes.
// Labels default to the URL with its password redacted: that is how the exit appears in logs,
// metrics and errors.
func ExampleReadExits() {
	list := `# datacenter: tried first; dc-1 takes twice dc-2's share
http://user:secret@10.0.0.1:3128  label=dc-1 weight=2
10.0.0.2:3128:user:secret         label=dc-2

# residential, used while no datacenter exit is ready for an origin
socks5h://user:secret@10.0.1.1:1080 tier=1
`
	exits, err := pool.ReadExits(strings.NewReader(list))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range exits {
		fmt.Printf("%-36s %-8s tier %d, weight %g\n", e.Label(), e.Scheme(), e.Tier(), e.Weight())
	}
	p, err := pool.New(pool.WithExits(exits...))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(p.Exits()), "exits")
	// Output:
	// dc-1                                 http     tier 0, weight 2
	// dc-2                                 http     tier 0, weight 1
	// socks5h://user:xxxxx@10.0.1.1:1080   socks5h  tier 1, weight 1
	// 3 exits
}

// A bad line is an error that gives its line number and the field that is wrong, and shows the
// proxy with its password redacted; no exit of the list is returned.
func ExampleReadExits_badLine() {
	list := "10.0.0.1:3128:user:secret label=ok\nhttp://user:secret@10.0.0.2:99999\n"
	exits, err := pool.ReadExits(strings.NewReader(list))
	fmt.Println(len(exits), err)
	// Output:
	// 0 pool: proxy list: line 2: field 1: proxy "http://user:xxxxx@10.0.0.2:99999": bad port "99999"
}

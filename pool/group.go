package pool

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Groups. Exits that share a fate — the addresses of one subnet, the IPs of one provider's pool —
// are banned together: a WAF that bans one address of a /24 often bans the /24. The origin guard
// (guard.go) notices when many exits fail one origin; a group is the same shape one level below:
// when at least MinBans members of a group are banned by one origin within Window, the group's
// other members are held for that origin to one probe at a time — one attempt in flight among
// them — until one of the group is served there. A ban spreading across a subnet then costs one
// attempt at a time, not one (or one per worker) per member; a group whose bans were a
// coincidence is released by its first served answer.
//
// An exit's group is its "group" attribute (attrs.go: group=isp-a in a proxy list,
// Exit.WithAttr("group", "isp-a") in code), else, when its host is an IPv4 literal, its /24
// ("203.0.113.0/24"). Hostnames and IPv6 hosts are in no group unless the attribute says so;
// loopback addresses (127.0.0.0/8: every one of them is this machine, where local proxy chains
// and tests live) are in none either; group=none takes an exit out of its automatic group. The
// attribute and the automatic groups share one namespace: group=203.0.113.0/24 joins that
// subnet's group.

// GroupSettings tune groups. Zero values mean the defaults.
type GroupSettings struct {
	// Disabled turns groups off: no exit is in a group, and nothing is held.
	Disabled bool
	// MinBans is how many distinct members of a group one origin must ban within Window before
	// the others are held for it (k). Default DefaultGroupMinBans; at least 2, at most 16.
	MinBans int
	// Window is how far back bans count. Default DefaultGroupWindow.
	Window time.Duration
}

// Defaults for GroupSettings, chosen from the pool simulation's round-3 world (docs/decisions.md,
// "Groups").
const (
	DefaultGroupMinBans = 3
	DefaultGroupWindow  = 2 * time.Minute
)

// GroupAttr is the attribute that names an exit's group; GroupNone, as its value, puts the exit in
// no group.
const (
	GroupAttr = "group"
	GroupNone = "none"
)

// maxGroupBans bounds MinBans, and how many distinct banned members an origin remembers per group.
const maxGroupBans = 16

// WithGroups sets the groups' settings. Default GroupSettings{}: groups on, by the defaults.
func WithGroups(s GroupSettings) Option {
	return optionFunc(func(c *config) error { c.groups = s; return nil })
}

// newGroupConfig validates s and fills in its defaults.
func newGroupConfig(s GroupSettings) (GroupSettings, error) {
	if s.MinBans != 0 && (s.MinBans < 2 || s.MinBans > maxGroupBans) {
		return s, fmt.Errorf("pool: GroupSettings.MinBans = %d: must be in [2, %d]", s.MinBans, maxGroupBans)
	}
	if s.Window < 0 {
		return s, fmt.Errorf("pool: GroupSettings.Window = %v: must not be negative", s.Window)
	}
	if s.MinBans == 0 {
		s.MinBans = DefaultGroupMinBans
	}
	if s.Window == 0 {
		s.Window = DefaultGroupWindow
	}
	return s, nil
}

// Group returns the exit's group: its group attribute (lower-cased), else the /24 of an IPv4
// literal host outside loopback, else "" (none; also for group=none).
func (e *Exit) Group() string {
	if g, ok := e.Attr(GroupAttr); ok {
		if g = strings.ToLower(g); g == GroupNone {
			return ""
		}
		return g
	}
	a, err := netip.ParseAddr(e.u.Hostname())
	if err != nil || !a.Is4() || a.IsLoopback() || a.IsUnspecified() {
		return ""
	}
	return netip.PrefixFrom(a, 24).Masked().String()
}

// kinship is an exit set's groups (of two members or more): made with the set, never changed.
type kinship struct {
	of     map[uint32]int // exit id → index in groups
	groups []kin
}

// kin is one group of an exit set.
type kin struct {
	key string
	ids []uint32 // its members, in the set's order
}

// buildKinship returns the groups of all, or nil when groups are off or no two exits share one.
func (p *Pool) buildKinship(all []*exitState) *kinship {
	if p.groups.Disabled {
		return nil
	}
	byKey := map[string][]uint32{}
	var keys []string
	for _, es := range all {
		g := es.exit.Group()
		if g == "" {
			continue
		}
		if byKey[g] == nil {
			keys = append(keys, g)
		}
		byKey[g] = append(byKey[g], es.id)
	}
	k := &kinship{of: map[uint32]int{}}
	for _, key := range keys {
		if ids := byKey[key]; len(ids) >= 2 {
			for _, id := range ids {
				k.of[id] = len(k.groups)
			}
			k.groups = append(k.groups, kin{key: key, ids: ids})
		}
	}
	if len(k.groups) == 0 {
		return nil
	}
	return k
}

// groupOf returns the group of exit id in the set, or nil.
func (k *kinship) groupOf(id uint32) *kin {
	if k == nil {
		return nil
	}
	i, ok := k.of[id]
	if !ok {
		return nil
	}
	return &k.groups[i]
}

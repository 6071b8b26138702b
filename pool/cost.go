package pool

import (
	"fmt"
	"math"
	"strconv"
)

// Cost. What an exit costs is written as two attributes of the exit (attrs.go, the pool's one
// attribute model), not as fields of their own, so that proxy lists carry it as they carry any
// fact of an exit ("cost-per-gb=4.5 cost-per-request=0.0002"), Sync sees a change of price as it
// sees any change of attributes, and a Want may even ask for it:
//
//   - cost-per-gb: the price of 10⁹ bytes (a decimal gigabyte, as providers bill), counted in
//     both directions as package transport counts them on the wire to the proxy (Traffic:
//     headers, bodies, CONNECT, TLS);
//   - cost-per-request: the price of one attempt sent through the exit (one report of a lease).
//
// Prices are currency-free decimals — digits with at most one '.', no sign, no exponent, at most
// 15 significant digits — in whatever unit the operator bills in (dollars, euros, credits); every
// spend the pool reports is in that same unit, and mixing currencies in one pool is the
// operator's mistake to avoid. The values are checked with the other attributes (when an exit
// joins a pool, and by ReadExits per line, naming the line and the field).
//
// A tier may have a cost in code (WithTierCost); an exit's own attribute overrides its tier's
// price field by field.
//
// Spend is counted in billionths of the unit (nano-units) in int64 counters, so that bytes × price
// adds up without drift: an attempt of b bytes through an exit at g per GB and r per request costs
// round(b × g + r × 10⁹) nano-units — exact to a billionth of the unit per attempt.

// The attribute keys of an exit's prices.
const (
	AttrCostPerGB      = "cost-per-gb"
	AttrCostPerRequest = "cost-per-request"
)

// Cost is what traffic through an exit costs, in the operator's currency-free unit. The zero Cost
// is free.
type Cost struct {
	PerGB      float64 // per 10⁹ bytes, sent plus received
	PerRequest float64 // per attempt
}

// nanoPerUnit is how many counted nano-units make one unit of spend.
const nanoPerUnit = 1e9

// maxPrice bounds a price, so that a year of traffic through one exit fits the int64 counters.
const maxPrice = 1e6

// nanos returns what an attempt that moved tr costs, in nano-units.
func (c Cost) nanos(tr Traffic) int64 {
	if c == (Cost{}) {
		return 0
	}
	return int64(math.Round(float64(tr.Sent+tr.Received)*c.PerGB + c.PerRequest*nanoPerUnit))
}

// Of returns what an attempt that moved tr costs, in the cost's unit.
func (c Cost) Of(tr Traffic) float64 { return units(c.nanos(tr)) }

// units converts nano-units to units.
func units(n int64) float64 { return float64(n) / nanoPerUnit }

// validate reports what is wrong with c.
func (c Cost) validate() error {
	for _, f := range [...]struct {
		name string
		v    float64
	}{{AttrCostPerGB, c.PerGB}, {AttrCostPerRequest, c.PerRequest}} {
		if !(f.v >= 0 && f.v <= maxPrice) {
			return fmt.Errorf("%s %v: want a price from 0 to %v", f.name, f.v, float64(maxPrice))
		}
	}
	return nil
}

// WithCost returns a copy of e with its prices set as attributes (cost-per-gb, cost-per-request);
// a zero field removes that attribute, so the tier's price applies. The prices are checked when
// the exit joins a pool.
func (e *Exit) WithCost(c Cost) *Exit {
	return e.WithAttr(AttrCostPerGB, formatPrice(c.PerGB)).WithAttr(AttrCostPerRequest, formatPrice(c.PerRequest))
}

// formatPrice writes a price as a cost attribute's value; "" for zero.
func formatPrice(v float64) string {
	if v == 0 {
		return ""
	}
	if !(v > 0) || math.IsInf(v, 0) {
		return "invalid" // fails checkCostAttr when the exit joins a pool
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// Cost returns the exit's own prices (its cost attributes) and whether it has either. A pool adds
// its tier's price for a field the exit leaves unset (WithTierCost).
func (e *Exit) Cost() (Cost, bool) {
	gb, okGB := e.price(AttrCostPerGB)
	req, okReq := e.price(AttrCostPerRequest)
	return Cost{PerGB: gb, PerRequest: req}, okGB || okReq
}

// price returns the exit's price attribute key, parsed; a value that does not parse (only an exit
// that never joined a pool may hold one) is no price.
func (e *Exit) price(key string) (float64, bool) {
	v, ok := e.Attr(key)
	if !ok {
		return 0, false
	}
	f, err := parsePrice(v)
	return f, err == nil
}

// checkCostAttr checks the value of a cost attribute (other keys pass): attrs.go calls it for
// every attribute.
func checkCostAttr(key, value string) error {
	if key != AttrCostPerGB && key != AttrCostPerRequest {
		return nil
	}
	if _, err := parsePrice(value); err != nil {
		return fmt.Errorf("attribute %s: %w", key, err)
	}
	return nil
}

// parsePrice parses a price: digits with at most one '.', at most 15 significant digits, no
// larger than maxPrice.
func parsePrice(s string) (float64, error) {
	digits, dot := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case '0' <= c && c <= '9':
			if c != '0' || digits > 0 {
				digits++
			}
		case c == '.' && !dot:
			dot = true
		default:
			return 0, fmt.Errorf("price %q: byte %d (%q) is not a digit or the one '.' of a decimal", s, i+1, c)
		}
	}
	if s == "" || s == "." {
		return 0, fmt.Errorf("price %q: want a decimal such as 4.5", s)
	}
	if digits > 15 {
		return 0, fmt.Errorf("price %q: %d significant digits, want at most 15", s, digits)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f > maxPrice {
		return 0, fmt.Errorf("price %q: want at most %v", s, float64(maxPrice))
	}
	return f, nil
}

// WithTierCost sets the prices of the exits of tier that have no cost attributes of their own (an
// exit's attribute overrides its tier's price field by field). Given twice for one tier, the
// later wins.
func WithTierCost(tier int, c Cost) Option {
	return optionFunc(func(cfg *config) error {
		if err := c.validate(); err != nil {
			return fmt.Errorf("pool: WithTierCost(%d): %w", tier, err)
		}
		if cfg.spend.tierCost == nil {
			cfg.spend.tierCost = make(map[int]Cost)
		}
		cfg.spend.tierCost[tier] = c
		return nil
	})
}

// CostOf returns what traffic through e costs in this pool: e's own prices, its tier's for a
// field e leaves unset.
func (p *Pool) CostOf(e *Exit) Cost {
	c := p.spend.tierCost[e.tier]
	if len(e.attrs) == 0 {
		return c
	}
	if v, ok := e.price(AttrCostPerGB); ok {
		c.PerGB = v
	}
	if v, ok := e.price(AttrCostPerRequest); ok {
		c.PerRequest = v
	}
	return c
}

package pool

// Spend. Each report of a lease costs its exit's price (cost.go) of the bytes it moved plus its
// price per request; the spend is counted beside the bytes, per exit (ExitStatus.Spend) and per
// origin (OriginTraffic.Spend), charged to the tier's budgets (budget.go), and returned with the
// report (Reported.Spend), which package transport hands to its observers
// (transport.AttemptResult.Spend). Bytes counted outside any lease (Pool.AddTraffic) cost their
// price per byte, and no price per request. Counting is a map read for the tier's price, a
// parse of the exit's cost attributes when it has attributes, and an atomic addition per total:
// no allocation, and nothing on the pick.

// spendOn counts what the attempt of t, which moved tr, cost: towards its exit's and its origin's
// totals and its tier's budgets. It returns the spend in nano-units.
func (p *Pool) spendOn(t *ticket, tr Traffic) int64 {
	if !t.exit.priced && p.spend.budgets == nil {
		return 0
	}
	e := t.exit.exit
	n := p.CostOf(e).nanos(tr)
	if n != 0 {
		p.traffic.counter(t.id).spend.Add(n)
		t.origin.traffic.spend.Add(n)
	}
	if p.spend.budgets != nil {
		p.chargeBudgets(e.tier, t.now, tr, n)
	}
	return n
}

// spendOutside counts what bytes moved outside any lease cost (AddTraffic): their price per byte,
// charged to the tier's budgets at the pool's current time. o is nil when the pool does not keep
// the origin. It returns the spend in nano-units.
func (p *Pool) spendOutside(es *exitState, o *originState, tr Traffic) int64 {
	c := p.CostOf(es.exit)
	c.PerRequest = 0
	n := c.nanos(tr)
	if n != 0 {
		p.traffic.counter(es.id).spend.Add(n)
		if o != nil {
			o.traffic.spend.Add(n)
		}
	}
	if p.spend.budgets != nil {
		p.chargeBudgets(es.exit.tier, p.clock.Now(), tr, n)
	}
	return n
}

// spent returns what a counter's attempts cost, in units; 0 for a nil counter.
func (c *trafficCounter) spent() float64 {
	if c == nil {
		return 0
	}
	return units(c.spend.Load())
}

// spentBy returns what the exit with id cost since it joined the pool, in units.
func (p *Pool) spentBy(id uint32) float64 { return p.traffic.lookup(id).spent() }

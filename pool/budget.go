package pool

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// Budgets. A tier may be given a budget per period — a spend (in its cost unit, cost.go) or a
// number of bytes — with WithTierBudget. While a tier's budget for the current period is spent,
// picks pass over the tier as if none of its exits were ready: they escalate to the next tier that
// has a ready exit, and a pick that only a spent tier could serve (it is the only tier, or the only
// one with exits that match the request's Want, or the tier of the exit a Request.Exit or a
// session pins) fails with a *BudgetSpentError, which matches ErrBudgetSpent and says when the
// budget renews. Observers that implement BudgetObserver are told once per budget and period, on
// the first pick that finds it spent; a refused pick also reaches Observer.Refused.
//
// Within one attempt. What an attempt costs is known only once it has ended (its bytes), so a
// budget is checked when a pick admits an attempt and charged when the attempt is reported: a
// tier is admitted while something is left of its budget, and the attempt that spends the rest
// is the last one admitted. Sequential attempts therefore stop within one attempt of the limit;
// concurrent ones overshoot by at most the attempts in flight when the limit was crossed (each
// was admitted while something was left). An attempt is charged to the period it was admitted in
// (Lease.Info().At): the budget that let it go pays for it, and a new period starts whole.
//
// Budgets are kept by ratelimit.BudgetSource values: a ratelimit.LocalBudget per budget, unless
// WithBudgetSource supplies another — a fleet store's (store/redis Store.BudgetSource), which
// shares each budget across the members of a fleet the way Limits.ExitSource shares exit rate
// limits. A pool with no budget reads nothing more on a pick.

// ErrBudgetSpent is matched (errors.Is) by the error Pick returns when the only tiers that could
// serve a request have spent their budgets. The concrete error is a *BudgetSpentError.
var ErrBudgetSpent = errors.New("pool: budget spent")

// Budget is a tier's budget for each period: a spend or a number of bytes, not both (give
// WithTierBudget twice for both). Periods are aligned on the Unix epoch (ratelimit.Budget): a
// 24-hour budget renews at 00:00 UTC.
type Budget struct {
	Spend  float64       // the spend allowed per period, in the pool's cost unit; or
	Bytes  int64         // the bytes allowed per period, sent plus received (Traffic)
	Period time.Duration // at least a second
}

// String describes the budget: "spend 12.5 per 24h0m0s" or "1000000 bytes per 1h0m0s".
func (b Budget) String() string {
	if b.Bytes > 0 {
		return fmt.Sprintf("%d bytes per %v", b.Bytes, b.Period)
	}
	return fmt.Sprintf("spend %v per %v", b.Spend, b.Period)
}

// limit converts b into what a ratelimit.BudgetSource keeps: bytes, or spend in nano-units.
func (b Budget) limit() (ratelimit.Budget, error) {
	switch {
	case b.Spend != 0 && b.Bytes != 0:
		return ratelimit.Budget{}, errors.New("both Spend and Bytes set, want one (give a budget for each)")
	case b.Bytes < 0:
		return ratelimit.Budget{}, fmt.Errorf("Bytes %d, want more than 0", b.Bytes)
	case b.Bytes > 0:
		rb := ratelimit.Budget{Max: b.Bytes, Period: b.Period}
		return rb, rb.Validate()
	case !(b.Spend > 0 && b.Spend <= maxBudgetSpend):
		return ratelimit.Budget{}, fmt.Errorf("Spend %v, want more than 0 and at most %v", b.Spend, maxBudgetSpend)
	}
	rb := ratelimit.Budget{Max: int64(math.Round(b.Spend * nanoPerUnit)), Period: b.Period}
	return rb, rb.Validate()
}

// WithTierBudget gives tier a budget per period (see Budget). A tier may have several (a spend
// and a byte budget, or a daily and an hourly one): it is passed over while any is spent.
// Budgets need tiers: with WithoutTiers, New fails.
func WithTierBudget(tier int, b Budget) Option {
	return optionFunc(func(c *config) error {
		if _, err := b.limit(); err != nil {
			return fmt.Errorf("pool: WithTierBudget(%d): %w", tier, err)
		}
		c.spend.given = append(c.spend.given, tierBudgetOf{tier, b})
		return nil
	})
}

// WithBudgetSource makes the pool keep each tier budget in the source src returns for it, instead
// of in a ratelimit.LocalBudget: a fleet store's (store/redis Store.BudgetSource) shares it across
// processes. name identifies the budget among the pool's ("tier-1-spend-24h0m0s"): a fleet's
// members that share a budget must give the same tier the same budget. A nil source keeps that
// budget locally.
func WithBudgetSource(src func(name string, b ratelimit.Budget) ratelimit.BudgetSource) Option {
	return optionFunc(func(c *config) error {
		if src == nil {
			return errors.New("pool: WithBudgetSource: nil func")
		}
		c.spend.source = src
		return nil
	})
}

// spendBook is what the pool knows about prices and budgets; read-only once the pool is made.
type spendBook struct {
	tierCost map[int]Cost // WithTierCost
	given    []tierBudgetOf
	source   func(string, ratelimit.Budget) ratelimit.BudgetSource
	budgets  map[int][]*tierBudget // by tier; nil when there are none
}

type tierBudgetOf struct {
	tier int
	b    Budget
}

// tierBudget is one budget of one tier, as the pool keeps it.
type tierBudget struct {
	tier      int
	b         Budget
	name      string
	src       ratelimit.BudgetSource
	announced atomic.Int64 // the last period observers were told it was spent in
}

// build makes the budgets' sources, once the options are applied.
func (sb *spendBook) build(ignoreTiers bool) error {
	if len(sb.given) == 0 {
		return nil
	}
	if ignoreTiers {
		return errors.New("pool: WithTierBudget needs tiers, and WithoutTiers ignores them")
	}
	sb.budgets = make(map[int][]*tierBudget)
	for _, g := range sb.given {
		rb, _ := g.b.limit() // checked by WithTierBudget
		kind := "spend"
		if g.b.Bytes > 0 {
			kind = "bytes"
		}
		tb := &tierBudget{tier: g.tier, b: g.b, name: fmt.Sprintf("tier-%d-%s-%v", g.tier, kind, g.b.Period)}
		if sb.source != nil {
			tb.src = sb.source(tb.name, rb)
		}
		if tb.src == nil {
			lb, err := ratelimit.NewLocalBudget(rb)
			if err != nil {
				return fmt.Errorf("pool: WithTierBudget(%d): %w", g.tier, err)
			}
			tb.src = lb
		}
		tb.announced.Store(math.MinInt64)
		sb.budgets[g.tier] = append(sb.budgets[g.tier], tb)
	}
	return nil
}

// tierSpent reports whether the tier of g has spent a budget at now, for a pick whose candidates
// in g are sub; if so, and the tier has candidates, it notes in c the budget and when it renews
// (for the BudgetSpentError of a pick no other tier serves), and tells observers the first time
// in the budget's period.
func (p *Pool) tierSpent(now time.Time, g *tierGroup, sub *subset, c *choice) bool {
	return p.spend.budgets != nil && p.tierBudgetSpentFor(now, g, sub, c) // inlined: no budgets, nothing more
}

func (p *Pool) tierBudgetSpentFor(now time.Time, g *tierGroup, sub *subset, c *choice) bool {
	tb, renews := p.spentBudget(now, g.tier)
	if tb == nil {
		return false
	}
	if sub.size(g) > 0 && (c.budget == nil || renews.Before(c.budgetRenews)) {
		c.budget, c.budgetRenews = tb, renews
	}
	return true
}

// spentBudget returns the first budget of tier that is spent at now, and when it renews; nil when
// none is.
func (p *Pool) spentBudget(now time.Time, tier int) (*tierBudget, time.Time) {
	for _, tb := range p.spend.budgets[tier] {
		left, renews := tb.src.Left(now)
		if left > 0 {
			continue
		}
		// Read before writing: every pick that finds the budget spent passes here.
		if n, _ := tb.src.Budget().PeriodAt(now); tb.announced.Load() != n && tb.announced.Swap(n) != n {
			p.obs.budgetSpent(BudgetEvent{Tier: tb.tier, Budget: tb.b, Name: tb.name, At: now, Renews: renews})
		}
		return tb, renews
	}
	return nil, time.Time{}
}

// tierBudgetSpent reports whether the tier of es has spent a budget at now: a session pinned to
// es moves to another exit.
func (p *Pool) tierBudgetSpent(now time.Time, es *exitState) bool {
	if p.spend.budgets == nil {
		return false
	}
	tb, _ := p.spentBudget(now, es.exit.tier)
	return tb != nil
}

// chargeBudgets charges an attempt admitted at admitted, which moved tr and cost spend
// nano-units, to the budgets of tier.
func (p *Pool) chargeBudgets(tier int, admitted time.Time, tr Traffic, spend int64) {
	for _, tb := range p.spend.budgets[tier] {
		if tb.b.Bytes > 0 {
			tb.src.Charge(admitted, tr.Sent+tr.Received)
		} else {
			tb.src.Charge(admitted, spend)
		}
	}
}

// budgetError returns the error of a pick that only spent tiers could serve.
func budgetError(origin string, c *choice, now time.Time) error {
	return &BudgetSpentError{Origin: origin, Tier: c.budget.tier, Budget: c.budget.b, Renews: c.budgetRenews, RetryIn: untilPositive(c.budgetRenews, now)}
}

// BudgetSpentError says that the only tiers that could serve a request for Origin have spent a
// budget: Tier (the one whose budget renews soonest), the Budget, and when it renews.
type BudgetSpentError struct {
	Origin  string
	Tier    int
	Budget  Budget
	Renews  time.Time     // when the period ends and the budget is whole again
	RetryIn time.Duration // until Renews
}

// Error names the origin, the tier, its budget and the time until it renews.
func (e *BudgetSpentError) Error() string {
	return fmt.Sprintf("pool: budget spent: tier %d has spent its budget (%v) for %s, renews in %v",
		e.Tier, e.Budget, e.Origin, e.RetryIn.Round(time.Second))
}

// Is makes errors.Is(err, ErrBudgetSpent) true.
func (e *BudgetSpentError) Is(target error) bool { return target == ErrBudgetSpent }

// BudgetObserver is implemented by observers that want to know when a tier's budget is spent.
// The pool calls BudgetSpent once per budget and period, on the first pick that finds the budget
// spent (picks then pass over the tier), after every lock is released; like Observer's methods it
// may be called concurrently and must be quick.
type BudgetObserver interface {
	BudgetSpent(e BudgetEvent)
}

// BudgetEvent says that a tier's budget was found spent.
type BudgetEvent struct {
	Tier   int
	Budget Budget
	Name   string    // the budget's name, as WithBudgetSource was given it
	At     time.Time // the pick that found it spent
	Renews time.Time // when its period ends
}

func (os *observers) budgetSpent(e BudgetEvent) {
	for _, o := range os.load() {
		if bo, ok := o.o.(BudgetObserver); ok {
			bo.BudgetSpent(e)
		}
	}
}

// BudgetStatus is one tier budget in a Snapshot: what is left of it in the current period.
type BudgetStatus struct {
	Tier   int       `json:"tier"`
	Name   string    `json:"name"`
	Spend  float64   `json:"spend,omitempty"` // the budget, when it is a spend
	Bytes  int64     `json:"bytes,omitempty"` // the budget, when it is bytes
	Left   float64   `json:"left"`            // in the budget's unit; 0 or less when spent
	Renews time.Time `json:"renews"`
}

// budgetStatus lists the pool's budgets at now, by tier.
func (p *Pool) budgetStatus(now time.Time) []BudgetStatus {
	var out []BudgetStatus
	for _, tbs := range p.spend.budgets {
		for _, tb := range tbs {
			left, renews := tb.src.Left(now)
			st := BudgetStatus{Tier: tb.tier, Name: tb.name, Spend: tb.b.Spend, Bytes: tb.b.Bytes, Left: float64(left), Renews: renews}
			if tb.b.Bytes == 0 {
				st.Left = units(left)
			}
			out = append(out, st)
		}
	}
	return out
}

// maxBudgetSpend bounds a spend budget so that it fits the int64 nano-units its source counts.
const maxBudgetSpend = 1e9

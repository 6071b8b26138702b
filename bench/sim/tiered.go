package sim

import (
	"math"
	"time"
)

// CrawleeTiered is Crawlee's tiered proxies (ProxyConfiguration with tieredProxyUrls, the peer
// that knows tiers): the exits of each tier in a list, a tracker per domain that predicts the tier
// of its next request, and round-robin within the tier predicted, one counter shared by every
// tier. The tracker (ProxyTierTracker in packages/core/src/proxy_configuration.ts) keeps an error
// score per tier: a failed request adds 10 to the score of the tier it went through, and each
// prediction takes 1 from every other tier's score, then moves to the neighbouring tier whose score
// is lower than the current one's (down when they tie). Crawlee adds the error when it retries a
// failed request; here each failed attempt adds it, since a worker's next request is a fresh one.
// Crawlee's step reads, after moving down, "if the score here equals the one below, go down
// again", which would step below tier 0; the port takes it as the alternative it is meant as.
// It has no breakers: a dead exit of the tier keeps its turn in the rotation.
func CrawleeTiered() Strategy {
	return Strategy{Name: CrawleeTieredName, New: func(env *Env) (Router, func(), error) {
		var byTier [][]int
		for e, x := range env.Exits {
			for len(byTier) <= x.Tier() {
				byTier = append(byTier, nil)
			}
			byTier[x.Tier()] = append(byTier[x.Tier()], e)
		}
		// A tier with no exits (tiers need not be contiguous) is left out, as a list would be.
		var tiers [][]int
		for _, t := range byTier {
			if len(t) > 0 {
				tiers = append(tiers, t)
			}
		}
		trackers := make([]tierTracker, len(env.Scenario.Origins))
		for i := range trackers {
			trackers[i].score = make([]int, len(tiers))
		}
		next := 0
		return &exitStrategy{env: env, choose: func(q Request, _ time.Time) (int, func(bool), time.Duration) {
			tr := &trackers[q.Origin]
			t := tr.predict()
			e := tiers[t][next%len(tiers[t])]
			next++
			return e, func(ok bool) {
				if !ok {
					tr.score[t] += 10
				}
			}, 0
		}}, nil, nil
	}}
}

// CrawleeTieredName is CrawleeTiered's name in the report.
const CrawleeTieredName = "Crawlee tiered proxies"

// tierTracker is Crawlee's ProxyTierTracker for one domain.
type tierTracker struct {
	score []int // error score by tier
	cur   int   // the tier predicted
}

// predict takes one step of the tracker and returns the tier for the next request.
func (tr *tierTracker) predict() int {
	for i := range tr.score {
		if i != tr.cur && tr.score[i] > 0 {
			tr.score[i]--
		}
	}
	left, right := math.MaxInt, math.MaxInt
	if tr.cur > 0 {
		left = tr.score[tr.cur-1]
	}
	if tr.cur < len(tr.score)-1 {
		right = tr.score[tr.cur+1]
	}
	switch here := tr.score[tr.cur]; {
	case here > min(left, right) && left <= right:
		tr.cur--
	case here > min(left, right):
		tr.cur++
	case here == left:
		tr.cur--
	}
	return tr.cur
}

package ratelimit

import "time"

// Learning a sliding window from one 429.
//
// An origin that counts a sliding window of length L answers the request past its allowance N
// with a Retry-After that runs until the oldest of the N requests it accepted in the last L leaves
// the window. A pair that knows its own successes of the last L therefore reads L and N off one
// 429: for the right L, its oldest success within the last L, plus L, is when the Retry-After
// says, and N is how many of them there are. Two resets of a sliding window are not a window
// apart, so the learning from consecutive resets (learn.go) reads a wrong length off them (18 s
// for a minute, say), and the pair was paced at a sixth of what the origin allows, then raised
// into 429s. Each natural length the pair has been tracking its successes for is tried; the one
// whose prediction falls within fitSlack of the Retry-After and that explains the pair's earlier
// successes too (consistent) is the fit, if it is the only one: a short Retry-After fits any short
// length (the oldest success within it is always just inside), and says nothing.
//
// Against an origin counting the clock minute a fit would often succeed too, and wrongly: a pair
// that met the 429 late in the minute has some success just inside any short window (6 in 15 s,
// for 12 a minute). Its resets fall on the clock's whole minutes, so a reset on a boundary of the
// clock (onBoundary) is left to the learning from consecutive resets.
//
// Successes are noted when the attempt is reported, a latency after the origin counted them; the
// 429 is too. fitSlack absorbs the difference of the two latencies and the Retry-After's rounding
// up to whole seconds.
const fitSlack = 1500 * time.Millisecond

// fitLengths are the window lengths a fit tries: the natural ones of a second and more, up to an
// hour (a pair keeps at most recentCap successes, and a day's would not fit).
var fitLengths = naturalWindows[1 : len(naturalWindows)-1]

// boundary is the grain of the clock that fixed windows reset on: their resets fall on whole
// minutes, half or quarter minutes, ten seconds of the clock; a sliding window's anywhere.
const boundary = int64(10 * time.Second)

// onBoundary reports whether reset, a 429's instant plus its Retry-After, may be a fixed window's:
// within what the rounding up to whole seconds and the latencies allow after a whole boundary of
// the clock (or just before it). A sliding window's reset lands there three times in ten; its next
// 429 fits instead.
func onBoundary(reset int64) bool {
	off := reset % boundary
	return off <= int64(2500*time.Millisecond) || off >= boundary-int64(500*time.Millisecond)
}

// consistent reports, under p.mu, whether n per window of w explains every success the pair noted
// since from: under that window the origin had accepted fewer than n in the window before each of
// them, or it would have refused it. The window is narrowed by fitSlack for the latencies. A long
// window fits any one 429 of a pair that sends often — its oldest success in the window is always
// just inside it — and this is what rules it out: the pair's successes kept more than n in such
// windows before.
func (p *Pair) consistent(from, w int64, n int) bool {
	lo := 0
	for j, s := range p.recent {
		if s-w < from {
			continue // older successes it did not note would count too
		}
		for p.recent[lo] <= s-w+int64(fitSlack) {
			lo++
		}
		if j-lo >= n {
			return false
		}
	}
	return true
}

// slidingFit returns, under p.mu, the sliding window that explains a 429 at t with retryAfter
// from the pair's own successes (p.recent), if one does.
func (p *Pair) slidingFit(t int64, retryAfter time.Duration) (Window, bool) {
	if onBoundary(t + int64(retryAfter)) {
		return Window{}, false
	}
	from := p.tracked // every success since is in recent, unless recent is full
	if len(p.recent) >= recentCap {
		from = max(from, p.recent[0])
	}
	// The Retry-After was rounded up: the true wait is in (retryAfter-1s, retryAfter].
	want := int64(retryAfter) - int64(time.Second/2)
	best, bestDiff, fits := Window{}, int64(fitSlack), 0
	for _, l := range fitLengths {
		w := int64(l)
		if t-w < from {
			break // the pair has not watched this long: older successes it did not note count too
		}
		i := len(p.recent)
		for i > 0 && p.recent[i-1] > t-w {
			i--
		}
		n := len(p.recent) - i
		if n == 0 {
			continue
		}
		diff := p.recent[i] + w - t - want
		if diff < 0 {
			diff = -diff
		}
		if diff <= int64(fitSlack) && p.consistent(from, w, n) {
			fits++
			if diff <= bestDiff {
				best, bestDiff = Window{N: n, Length: l}, diff
			}
		}
	}
	return best, fits == 1
}

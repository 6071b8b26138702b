package sim

import (
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// Unmarked soft blocks, the round-3 dynamic of issue 28's differential soft-block check: an
// origin with Origin.SoftBans answers a banned pair 200 with its own "verify you are human" page —
// 2 KB, its own title, no vendor header or marker a detector knows — where the others get the
// 12 KB page (pageBody). The classifier alone calls it a success; the pool judges it by what the
// other exits get (pool.Lease.JudgePageAt), as a Transport does for every 2xx HTML page. The
// ground truth counts it as a ban's answer (Metrics.SoftBlocked: waste, not goodput), and the
// oracles, which know the bans, never send through a banned pair whatever its ban answers.

// round3SoftBanOrigins is how many of the round-3 world's origins that ban with a challenge page
// ban with a 200 block page instead.
const round3SoftBanOrigins = 3

// softBans deals the origins of sc whose bans answer a 200 block page: round3SoftBanOrigins of
// those that do not ban with a plain 403, from their own stream of seed.
func softBans(sc *Scenario, seed uint64) {
	var challenge []int
	for o, org := range sc.Origins {
		if !org.PlainBans {
			challenge = append(challenge, o)
		}
	}
	r := rand.New(rand.NewPCG(seed, 0x736f6674626c6b00))
	r.Shuffle(len(challenge), func(i, j int) { challenge[i], challenge[j] = challenge[j], challenge[i] })
	for _, o := range challenge[:min(round3SoftBanOrigins, len(challenge))] {
		sc.Origins[o].SoftBans = true
	}
}

// verifyBody is the block page a SoftBans origin answers a banned pair: 2 KB, 200 text/html.
var verifyBody = "<!doctype html><html><head><title>Verify you are human</title></head><body><form method=\"post\">" +
	strings.Repeat("<p>Please confirm that you are a person and not a program.</p>\n", 30) + "</form></body></html>"

// softBlockWire is the wire form of a SoftBlock answer.
func softBlockWire(req *http.Request) *http.Response {
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"text/html; charset=utf-8"}, "Content-Length": {strconv.Itoa(len(verifyBody))}},
		Request: req, Body: io.NopCloser(strings.NewReader(verifyBody)), ContentLength: int64(len(verifyBody)),
	}
}

// simPages holds what a Transport's page reader (transport.PageLooks.Read, the defaults) sees of
// each answer's wire form, read once: every page of one answer looks the same.
var simPages = sync.OnceValue(func() (pages [numAnswers]struct {
	pg pool.Page
	ok bool
}) {
	var pl transport.PageLooks
	for a := range numAnswers {
		r := Result{Answer: a}
		req := wireRequest(r)
		resp, err := onTheWire(r, req)
		if err != nil {
			continue
		}
		pg, ok, err := pl.Read(resp)
		resp.Body.Close()
		if err == nil {
			pages[a].pg, pages[a].ok = pg, ok
		}
	}
	return pages
})

// judgePage is what a Transport does with a successful attempt's page before it reports it: the
// pool's judgement of the page, by what the other exits get (pool.Lease.JudgePageAt).
func judgePage(l *pool.Lease, r Result, now time.Time, v pool.Verdict) pool.Verdict {
	if v.Outcome != pool.Success {
		return v
	}
	if p := simPages()[r.Answer]; p.ok {
		return l.JudgePageAt(now, v, p.pg)
	}
	return v
}

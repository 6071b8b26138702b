package pool_test

import (
	"context"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// Pages as a reader sees them: the 40 KB product page (its title shared by every product page of
// the class), a 2 KB "verify you are human" page, the site's own small page and titles.
const (
	titleShop, titleVerify, titleOther = 0x51a0, 0x7e41, 0x0da7
	classP, classSearch                = 11, 12
)

var (
	productPage = pool.Page{Class: classP, Size: 40_000, Title: titleShop}
	verifyPage  = pool.Page{Class: classP, Size: 2_000, Title: titleVerify}
	pageBlocked = pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, Detector: pool.PageDetector}
)

// pageStep is one attempt: through exit, at t0 + at, a 2xx page pg; the verdict JudgePageAt gives
// it, and the pair's state once that verdict is reported.
type pageStep struct {
	at   time.Duration
	exit string
	pg   pool.Page
	want pool.Verdict
	pair breaker.State
}

func runPages(t *testing.T, p *pool.Pool, clk *clock.Fake, steps []pageStep) {
	t.Helper()
	for i, s := range steps {
		clk.Set(syncT0.Add(s.at))
		l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.example", Exit: s.exit})
		if err != nil {
			t.Fatalf("step %d: Pick(via %s) = %v", i, s.exit, err)
		}
		v := l.JudgePageAt(clk.Now(), pageVerdict, s.pg)
		got := l.Report(v)
		if v != s.want || got.PairState != s.pair {
			t.Errorf("step %d: JudgePageAt(via %s, %+v) = %+v, pair %v after; want %+v, pair %v",
				i, s.exit, s.pg, v, got.PairState, s.want, s.pair)
		}
	}
}

// TestPageSoftBlock: e0 gets a 2 KB verify page while e1, e2 and e3 get the 40 KB product page. Its
// first page comes before any evidence, its second deviates (the first in a row), its third is a
// block: the pair opens, and its probe 10 s later, still the verify page while the others are
// served, reopens it. The others' pages stay successes throughout.
func TestPageSoftBlock(t *testing.T) {
	p, clk := newSuspectPool(t, 4)
	s := time.Second
	runPages(t, p, clk, []pageStep{
		{0, "e0", verifyPage, pageVerdict, breaker.Closed},
		{1 * s, "e1", productPage, pageVerdict, breaker.Closed},
		{2 * s, "e2", productPage, pageVerdict, breaker.Closed},
		{3 * s, "e0", verifyPage, pageVerdict, breaker.Closed}, // deviates: one in a row
		{4 * s, "e3", productPage, pageVerdict, breaker.Closed},
		{5 * s, "e0", verifyPage, pageBlocked, breaker.Open}, // two in a row, 1 of 4 exits
		{6 * s, "e1", productPage, pageVerdict, breaker.Closed},
		{7 * s, "e2", productPage, pageVerdict, breaker.Closed},
		{16 * s, "e0", verifyPage, pageBlocked, breaker.Open}, // the probe: the ban goes on
		{17 * s, "e3", productPage, pageVerdict, breaker.Closed},
	})
	// Back to the real page: the probe closes the pair.
	runPages(t, p, clk, []pageStep{
		{36 * s, "e0", productPage, pageVerdict, breaker.Closed}, // the second OPEN window is 20 s
	})
}

// TestPageSiteServesEveryoneTheSame: a site that serves one small page to every exit (a
// maintenance page, a product list that is empty for all, an empty body) trips nothing, and
// neither do product pages whose sizes vary by less than PageSizeBand.
func TestPageSiteServesEveryoneTheSame(t *testing.T) {
	p, clk := newSuspectPool(t, 4)
	var steps []pageStep
	for i := range 12 {
		steps = append(steps, pageStep{time.Duration(i) * time.Second, []string{"e0", "e1", "e2", "e3"}[i%4], verifyPage, pageVerdict, breaker.Closed})
	}
	for i := range 8 { // an empty page to everyone: no page is realer than another
		steps = append(steps, pageStep{time.Duration(12+i) * time.Second, []string{"e0", "e1", "e2", "e3"}[i%4], pool.Page{Class: classSearch, Size: 0}, pageVerdict, breaker.Closed})
	}
	for i, size := range []int64{40_000, 12_000, 45_000, 11_000, 30_000, 44_000, 12_500, 13_000} {
		pg := pool.Page{Class: classP, Size: size, Title: titleShop + uint32(i)} // each product its own title
		steps = append(steps, pageStep{time.Duration(20+i) * time.Second, []string{"e0", "e1", "e2", "e3"}[i%4], pg, pageVerdict, breaker.Closed})
	}
	runPages(t, p, clk, steps)
}

// TestPageEvidenceRules: the other rules of the evidence, each on a fresh pool.
func TestPageEvidenceRules(t *testing.T) {
	s := time.Second
	notReal := pool.Page{Class: classP, Size: 40_000, Title: titleShop, Mark: pool.PageNotReal}
	real := pool.Page{Class: classP, Size: 40_000, Title: titleShop, Mark: pool.PageReal}
	sameSizeOtherTitle := pool.Page{Class: classP, Size: 39_000, Title: titleOther}
	biggerOtherTitle := pool.Page{Class: classP, Size: 90_000, Title: titleOther}
	otherClass := pool.Page{Class: classSearch, Size: 2_000, Title: titleVerify}
	atLeast := pool.Page{Class: classP, Size: 8_192, AtLeast: true, Title: 0}
	tests := []struct {
		name  string
		steps []pageStep
	}{
		{"only one other served: no evidence", []pageStep{
			{0, "e1", productPage, pageVerdict, breaker.Closed},
			{1 * s, "e0", verifyPage, pageVerdict, breaker.Closed},
			{2 * s, "e0", verifyPage, pageVerdict, breaker.Closed},
			{3 * s, "e0", verifyPage, pageVerdict, breaker.Closed},
		}},
		{"the evidence is out of the window", []pageStep{
			{0, "e1", productPage, pageVerdict, breaker.Closed},
			{1 * s, "e2", productPage, pageVerdict, breaker.Closed},
			{2 * s, "e0", verifyPage, pageVerdict, breaker.Closed},
			{40 * s, "e0", verifyPage, pageVerdict, breaker.Closed},
			{41 * s, "e0", verifyPage, pageVerdict, breaker.Closed},
		}},
		{"half the exits get it: the site's", []pageStep{
			{0, "e1", productPage, pageVerdict, breaker.Closed},
			{1 * s, "e2", productPage, pageVerdict, breaker.Closed},
			{2 * s, "e3", verifyPage, pageVerdict, breaker.Closed},
			{3 * s, "e0", verifyPage, pageVerdict, breaker.Closed},
			{4 * s, "e0", verifyPage, pageVerdict, breaker.Closed}, // 2 of 4 like it
			{5 * s, "e0", verifyPage, pageBlocked, breaker.Open},   // the third in a row
		}},
		{"the caller's marker", []pageStep{
			{0, "e1", real, pageVerdict, breaker.Closed},
			{1 * s, "e2", real, pageVerdict, breaker.Closed},
			{2 * s, "e0", notReal, pageVerdict, breaker.Closed},
			{3 * s, "e0", notReal, pageBlocked, breaker.Open},
		}},
		{"a page marked real is never a block", []pageStep{
			{0, "e1", productPage, pageVerdict, breaker.Closed},
			{1 * s, "e2", productPage, pageVerdict, breaker.Closed},
			{2 * s, "e0", pool.Page{Class: classP, Size: 100, Mark: pool.PageReal}, pageVerdict, breaker.Closed},
			{3 * s, "e0", pool.Page{Class: classP, Size: 100, Mark: pool.PageReal}, pageVerdict, breaker.Closed},
		}},
		{"another title than the one the others share", []pageStep{
			{0, "e1", productPage, pageVerdict, breaker.Closed},
			{1 * s, "e2", productPage, pageVerdict, breaker.Closed},
			{2 * s, "e0", sameSizeOtherTitle, pageVerdict, breaker.Closed},
			{3 * s, "e0", sameSizeOtherTitle, pageBlocked, breaker.Open},
		}},
		{"a larger page with another title is not", []pageStep{
			{0, "e1", productPage, pageVerdict, breaker.Closed},
			{1 * s, "e2", productPage, pageVerdict, breaker.Closed},
			{2 * s, "e0", biggerOtherTitle, pageVerdict, breaker.Closed},
			{3 * s, "e0", biggerOtherTitle, pageVerdict, breaker.Closed},
			{4 * s, "e0", biggerOtherTitle, pageVerdict, breaker.Closed},
		}},
		{"classes are compared apart", []pageStep{
			{0, "e1", productPage, pageVerdict, breaker.Closed},
			{1 * s, "e2", productPage, pageVerdict, breaker.Closed},
			{2 * s, "e0", otherClass, pageVerdict, breaker.Closed},
			{3 * s, "e0", otherClass, pageVerdict, breaker.Closed},
			{4 * s, "e0", otherClass, pageVerdict, breaker.Closed},
		}},
		{"a body longer than was read is not small", []pageStep{
			{0, "e1", productPage, pageVerdict, breaker.Closed},
			{1 * s, "e2", productPage, pageVerdict, breaker.Closed},
			{2 * s, "e0", atLeast, pageVerdict, breaker.Closed},
			{3 * s, "e0", atLeast, pageVerdict, breaker.Closed},
			{4 * s, "e0", atLeast, pageVerdict, breaker.Closed},
		}},
		{"the caller declares a block", []pageStep{
			{0, "e0", pool.Page{Class: classP, Size: 40_000, Mark: pool.PageBlock},
				pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, Detector: pool.PageCheckDetector}, breaker.Open},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, clk := newSuspectPool(t, 4)
			runPages(t, p, clk, tc.steps)
		})
	}
}

// TestPageJudgesOnlySuccesses: JudgePageAt leaves every verdict but a pair-scoped, unmarked
// Success as it is, and does nothing on the zero Lease or a lease already reported.
func TestPageJudgesOnlySuccesses(t *testing.T) {
	p, clk := newSuspectPool(t, 4)
	block := pool.Page{Mark: pool.PageBlock}
	for _, v := range []pool.Verdict{challenge, plain403Verdict, {Outcome: pool.Neutral, Class: pool.ClassCanceled},
		{Outcome: pool.Success, Scope: pool.ScopeExit}} {
		l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.example"})
		if err != nil {
			t.Fatal(err)
		}
		if got := l.JudgePageAt(clk.Now(), v, block); got != v {
			t.Errorf("JudgePageAt(%+v, PageBlock) = %+v, want it unchanged", v, got)
		}
		l.Release()
	}
	var zero pool.Lease
	if got := zero.JudgePageAt(clk.Now(), pageVerdict, block); got != pageVerdict {
		t.Errorf("zero Lease: JudgePageAt = %+v, want %+v", got, pageVerdict)
	}
	l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.example"})
	if err != nil {
		t.Fatal(err)
	}
	l.Report(pageVerdict)
	if got := l.JudgePageAt(clk.Now(), pageVerdict, block); got != pageVerdict {
		t.Errorf("reported Lease: JudgePageAt = %+v, want %+v", got, pageVerdict)
	}
}

// TestPageClassesAreBounded: an origin remembers a bounded number of classes; a class pushed out
// starts over, and its evidence with it.
func TestPageClassesAreBounded(t *testing.T) {
	p, clk := newSuspectPool(t, 4)
	s := time.Second
	steps := []pageStep{
		{0, "e1", productPage, pageVerdict, breaker.Closed},
		{1 * s, "e2", productPage, pageVerdict, breaker.Closed},
	}
	for i := range 8 { // more classes than an origin remembers push class P's record out
		steps = append(steps, pageStep{time.Duration(2+i) * s, "e3", pool.Page{Class: uint16(100 + i), Size: 1000}, pageVerdict, breaker.Closed})
	}
	steps = append(steps,
		pageStep{10 * s, "e0", verifyPage, pageVerdict, breaker.Closed},
		pageStep{11 * s, "e0", verifyPage, pageVerdict, breaker.Closed},
		pageStep{12 * s, "e0", verifyPage, pageVerdict, breaker.Closed})
	runPages(t, p, clk, steps)
}

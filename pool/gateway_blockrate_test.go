package pool_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

const rotLine = "http://acct-country-us:s3cret@gate.example:7777 label=rot rotate=request"

// rotReport picks rot for origin and reports v, returning the pair's state afterwards.
func rotReport(t *testing.T, p *pool.Pool, origin string, v pool.Verdict) breaker.State {
	t.Helper()
	l, err := p.Pick(context.Background(), pool.Request{Origin: origin})
	if err != nil {
		t.Fatalf("Pick(%s) = %v", origin, err)
	}
	if got := l.Exit().Label(); got != "rot" {
		t.Fatalf("picked %s, want rot", got)
	}
	return l.Report(v).PairState
}

func TestRotatingGatewayBlocksDoNotTripThePairUntilMostAnswersAre(t *testing.T) {
	p, _, _ := gatewayPool(t, rotLine)
	for range 4 {
		rotReport(t, p, "a.example", gwOK)
	}
	// 4 served, then blocks: the 6th block makes 10 answers, 6 of them blocks (more than half).
	for i := 1; i <= 5; i++ {
		if st := rotReport(t, p, "a.example", gwBlocked); st != breaker.Closed {
			t.Fatalf("block %d of 9 answers: pair %v, want CLOSED: a block through a rotating gateway is retried, not held against it", i, st)
		}
	}
	if st := rotReport(t, p, "a.example", gwBlocked); st != breaker.Open {
		t.Fatalf("6 blocks of 10 answers: pair %v, want OPEN: the gateway is burned for the origin", st)
	}
	_, err := p.Pick(context.Background(), pool.Request{Origin: "a.example"})
	var nh *pool.NoHealthyExitError
	if !errors.As(err, &nh) || nh.RetryIn <= 0 {
		t.Fatalf("Pick(a.example) while burned = %v, want a *NoHealthyExitError with a RetryIn", err)
	}
	if st := rotReport(t, p, "b.example", gwOK); st != breaker.Closed {
		t.Errorf("another origin: pair %v, want CLOSED: the gateway keeps serving it", st)
	}
}

func TestRotatingGatewayBackoffProbesOneAtATime(t *testing.T) {
	p, clk, _ := gatewayPool(t, rotLine)
	for range 10 {
		rotReport(t, p, "a.example", gwBlocked)
	}
	_, err := p.Pick(context.Background(), pool.Request{Origin: "a.example"})
	var nh *pool.NoHealthyExitError
	if !errors.As(err, &nh) {
		t.Fatalf("Pick while burned = %v, want *NoHealthyExitError", err)
	}
	clk.Advance(nh.RetryIn)
	probe, err := p.Pick(context.Background(), pool.Request{Origin: "a.example"})
	if err != nil || !probe.Info().Probe {
		t.Fatalf("Pick after the backoff = %+v, %v; want a probe", probe.Info(), err)
	}
	if _, err := p.Pick(context.Background(), pool.Request{Origin: "a.example"}); !errors.As(err, &nh) {
		t.Fatalf("second Pick while the probe is out = %v, want *NoHealthyExitError: one probe at a time", err)
	}
	// A blocked probe backs off again, longer.
	first := nh.RetryIn
	if st := probe.Report(gwBlocked).PairState; st != breaker.Open {
		t.Fatalf("blocked probe: pair %v, want OPEN", st)
	}
	_, err = p.Pick(context.Background(), pool.Request{Origin: "a.example"})
	if !errors.As(err, &nh) {
		t.Fatalf("Pick after a blocked probe = %v, want *NoHealthyExitError", err)
	}
	clk.Advance(nh.RetryIn)
	probe, err = p.Pick(context.Background(), pool.Request{Origin: "a.example"})
	if err != nil || !probe.Info().Probe {
		t.Fatalf("second probe = %+v, %v", probe.Info(), err)
	}
	if st := probe.Report(gwOK).PairState; st != breaker.Closed {
		t.Fatalf("served probe: pair %v, want CLOSED", st)
	}
	// The rate started afresh: one block after the return does not trip it again.
	if st := rotReport(t, p, "a.example", gwBlocked); st != breaker.Closed {
		t.Errorf("one block after the return: pair %v, want CLOSED (first backoff %v)", st, first)
	}
}

func TestRotatingGatewayBlockRateDecays(t *testing.T) {
	p, clk, _ := gatewayPool(t, rotLine)
	for range 9 {
		rotReport(t, p, "a.example", gwBlocked) // fewer answers than BlockRateMinAnswers: no judgement
	}
	clk.Advance(10 * pool.BlockRateHalfLife) // the 9 blocks now weigh 9/1024
	for i := 1; i <= 9; i++ {
		if st := rotReport(t, p, "a.example", gwBlocked); st != breaker.Closed {
			t.Fatalf("block %d after ten half-lives: pair %v, want CLOSED: the old blocks have decayed", i, st)
		}
	}
	if st := rotReport(t, p, "a.example", gwBlocked); st != breaker.Open {
		t.Fatalf("10 recent blocks: pair %v, want OPEN", st)
	}
}

func TestRotatingGateway429CountsAsABlock(t *testing.T) {
	p, _, _ := gatewayPool(t, rotLine)
	limited := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited}
	for i := 1; i < pool.BlockRateMinAnswers; i++ {
		if st := rotReport(t, p, "a.example", limited); st != breaker.Closed {
			t.Fatalf("429 %d: pair %v, want CLOSED", i, st)
		}
	}
	if st := rotReport(t, p, "a.example", limited); st != breaker.Open {
		t.Fatalf("%d 429s: pair %v, want OPEN", pool.BlockRateMinAnswers, st)
	}
}

func TestRotatingGatewayLineErrors(t *testing.T) {
	for _, line := range []string{
		"http://acct:s3cret@gate.example:7777 rotate=on",
		"http://acct-session-{session}:s3cret@gate.example:7777 rotate=request",
	} {
		_, err := pool.ReadExits(strings.NewReader(line))
		if err == nil || !strings.Contains(err.Error(), "rotate") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ReadExits(%q) = %v, want an error naming rotate, not the password", line, err)
		}
	}
	// A plain exit's blocks trip its pair at once, as before.
	p, _, _ := gatewayPool(t, "http://acct:s3cret@static.example:8080 label=rot")
	if st := rotReport(t, p, "a.example", gwBlocked); st != breaker.Open {
		t.Errorf("a static exit's block: pair %v, want OPEN", st)
	}
}

// egress-header= on a line that can report no egress IP — neither a session template nor a
// rotating gateway — is refused, the error naming the line (its number) and the attribute, never
// the password; on those two it is accepted.
func TestEgressHeaderOnlyOnGatewayLines(t *testing.T) {
	_, err := pool.ReadExits(strings.NewReader("http://acct:s3cret@static.example:8080 label=plain egress-header=X-Egress-IP"))
	if err == nil || !strings.Contains(err.Error(), "egress-header") || !strings.Contains(err.Error(), "line 1") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("ReadExits(a static line with egress-header) = %v, want an error naming the line and egress-header, not the password", err)
	}
	for _, line := range []string{
		rotLine + " egress-header=X-Egress-IP",
		"http://acct-session-{session}:s3cret@gate.example:7777 egress-header=X-Egress-IP",
	} {
		if _, err := pool.ReadExits(strings.NewReader(line)); err != nil {
			t.Errorf("ReadExits(%q) = %v, want it accepted", line, err)
		}
	}
}

package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/examples/internal/exampletest"
	"github.com/proxybreaker/proxybreaker/pool"
)

// TestRun runs the demo on a small configuration and checks what a newcomer is told it shows:
// exit-scoped failures park the whole exit, a rate cap trips only its pair, a hanging exit is
// timed out and taken out, most requests succeed, every response came through the exit the
// transport named, and no password is ever printed.
func TestRun(t *testing.T) {
	// 200 requests in about 10 s: dense enough that res-capped reliably meets shop's cap (more
	// than 5 requests through it to shop within 10 s); at 120 in 13 s it misses about one run in 16.
	cfg := config{Requests: 200, Workers: 8, Duration: 12 * time.Second, Seed: 1}
	var s summary
	text := exampletest.Output(t, secrets(), func(ctx context.Context, out io.Writer) (err error) {
		s, err = run(ctx, cfg, out)
		return err
	})
	t.Logf("summary: sent %d, ok %d, failures %v", s.Sent, s.Successes, s.Failures)
	checkRun(t, cfg, s, text)
}

// checkRun checks the properties the demo claims on the summary s and the output text of a run
// with cfg.
func checkRun(t *testing.T, cfg config, s summary, text string) {
	t.Helper()

	for _, c := range []struct {
		exit  string
		class pool.Class
	}{{"auth-bad", pool.ClassProxyAuth}, {"dead", pool.ClassProxyRefused}} {
		e := s.exit(c.exit)
		if e.Wide.Parks == 0 || e.Wide.Reasons[string(c.class)] == 0 {
			t.Errorf("%s: exit breaker parks = %d, reasons %v; want parked for %s", c.exit, e.Wide.Parks, e.Wide.Reasons, c.class)
		}
		if e.carried() != 0 {
			t.Errorf("%s carried %d requests, want 0", c.exit, e.carried())
		}
	}

	capped := s.exit(capProxy)
	if h := s.Pairs[pairKey{capProxy, "shop"}]; h.Trips == 0 || h.Reasons[string(pool.ClassRateLimited)] == 0 {
		t.Errorf("%s → shop: trips = %d, reasons %v; want tripped by %s", capProxy, h.Trips, h.Reasons, pool.ClassRateLimited)
	}
	if n := capped.OK["news"] + capped.OK["api"]; n == 0 {
		t.Errorf("%s carried %d successful requests to news and api, want some: a rate cap on shop must not take it out elsewhere", capProxy, n)
	}
	for _, o := range []string{"news", "api"} {
		if h := s.Pairs[pairKey{capProxy, o}]; h.Trips+h.Parks > 0 {
			t.Errorf("%s → %s: %+v, want never opened", capProxy, o, h)
		}
	}

	hang := s.exit("hang")
	if hang.Failed[pool.ClassTimeout] == 0 {
		t.Errorf("hang: failures %v, want timeouts", hang.Failed)
	}
	pairTrips := 0
	for k, h := range s.Pairs {
		if k.exit == "hang" {
			pairTrips += h.Trips
		}
	}
	// Taken out either way: a breaker opened, or the pick left it out after its first timeouts
	// (a timeout is the slowest answer a site has seen through any exit: latency-aware selection
	// then sends it only a trickle, at most a couple for each of the three origins in a run this
	// short).
	if n := hang.Failed[pool.ClassTimeout]; hang.Wide.Trips == 0 && pairTrips == 0 && n > 2*3 {
		t.Errorf("hang: %d timeouts with no breaker opened, want it taken out (a breaker, or at most %d timeouts, two per origin)", n, 2*3)
	}

	refused := s.RefusedNoExit + s.RefusedOrigin
	if attempted := s.Sent - refused; s.Successes*5 <= attempted*4 {
		t.Errorf("successes = %d of %d requests not refused, want more than 80%%", s.Successes, attempted)
	}
	if s.Sent != cfg.Requests {
		t.Errorf("sent = %d, want %d", s.Sent, cfg.Requests)
	}
	if s.Misrouted != 0 || s.Direct != 0 || s.Checked != s.Successes {
		t.Errorf("routing: misrouted %d, direct %d, checked %d of %d; want 0, 0, all", s.Misrouted, s.Direct, s.Checked, s.Successes)
	}

	lines := 0
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		lines++
		for _, pw := range secrets() {
			if strings.Contains(sc.Text(), pw) {
				t.Errorf("output line %d contains a password: %q", lines, sc.Text())
			}
		}
	}
	if s.Leaks != 0 || s.Lines != lines {
		t.Errorf("summary counted %d lines with %d leaks, want %d lines with 0 leaks", s.Lines, s.Leaks, lines)
	}
	if lines < 50 || !strings.Contains(text, "PARKED") {
		t.Errorf("output has %d lines and no PARKED state, want the live table:\n%s", lines, text)
	}
}

// TestHelp: -h says what the demo shows and how it is run.
func TestHelp(t *testing.T) {
	exampletest.CheckHelp(t, command(new(config)))
}

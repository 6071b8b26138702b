package main

import (
	"context"
	"errors"
	"io"
	"regexp"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/examples/internal/exampletest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/retry"
)

// TestRun plays the example's scenes and checks what each claims.
func TestRun(t *testing.T) {
	var res result
	secrets := []string{"right-alice", "wrong-alice", "right-bob", "wrong-bob", "right-carol", "wrong-carol"}
	text := exampletest.Output(t, secrets, func(ctx context.Context, out io.Writer) (err error) {
		res, err = runScenes(ctx, out, 8)
		return err
	})
	if res.Scene1OK != 8 || res.Scene1Repeats != 0 {
		t.Errorf("scene 1: %d of 8 requests served by a healthy exit, %d exits tried twice; want 8, 0\n%s", res.Scene1OK, res.Scene1Repeats, text)
	}
	// The retry waited for the soonest probe instead of spinning. Only a lower bound, with slack
	// for the time between the refusal and the hook's clock read: no wall-clock upper bounds here.
	if res.Scene2Probe < time.Second || res.Scene2Wait < res.Scene2Probe-500*time.Millisecond {
		t.Errorf("scene 2: waited %v for a soonest probe %v away, want about that (the 2s Retry-After, less the time since it was sent)", res.Scene2Wait, res.Scene2Probe)
	}
	var giveUp *retry.GiveUpError
	var noExit *pool.NoHealthyExitError
	if !errors.As(res.Scene3Err, &giveUp) || !errors.As(res.Scene3Err, &noExit) || res.Scene3Sent != 3 || res.Scene3Attempts != 4 {
		t.Errorf("scene 3: %v after %d attempts, %d of them sent; want a GiveUpError wrapping a NoHealthyExitError after 4, 3 sent (one per exit)",
			res.Scene3Err, res.Scene3Attempts, res.Scene3Sent)
	}
	checkAttemptCounts(t, text)
}

// checkAttemptCounts checks that scene 3 says as many attempts as retryablehttp's error does
// (regression: it said "3 attempts", then "giving up after 4 attempt(s)").
func checkAttemptCounts(t *testing.T, text string) {
	t.Helper()
	said := regexp.MustCompile(`after \S+ and (\d+) attempts`).FindStringSubmatch(text)
	gaveUp := regexp.MustCompile(`giving up after (\d+) attempt\(s\)`).FindStringSubmatch(text)
	if said == nil || gaveUp == nil || said[1] != gaveUp[1] {
		t.Errorf("scene 3 says %q attempts and the error %q, want the same count\n%s", said, gaveUp, text)
	}
}

// TestHelp: -h says what the example shows and how it is run, not a bare "Usage of" and the
// temporary binary's path.
func TestHelp(t *testing.T) {
	exampletest.CheckHelp(t, command(new(int)))
}

package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/retry"
)

// TestRun plays the example's scenes and checks what each claims.
func TestRun(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var out bytes.Buffer
	res, err := runScenes(&out, 8)
	if err != nil {
		t.Fatalf("runScenes = %v\n%s", err, out.String())
	}
	text := out.String()
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
	if !errors.As(res.Scene3Err, &giveUp) || !errors.As(res.Scene3Err, &noExit) || res.Scene3Attempts != 3 {
		t.Errorf("scene 3: %v after %d attempts, want a GiveUpError wrapping a NoHealthyExitError after 3", res.Scene3Err, res.Scene3Attempts)
	}
	for _, who := range []string{"alice", "bob", "carol"} {
		if strings.Contains(text, "right-"+who) || strings.Contains(text, "wrong-"+who) {
			t.Errorf("output shows %s's password:\n%s", who, text)
		}
	}
}

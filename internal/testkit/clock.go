package testkit

import (
	"runtime"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
)

// driveTurns bounds DriveClock's loop: a turn either advances the clock or yields the processor.
const driveTurns = 50_000_000

// DriveClock moves clk forward by step whenever a timer is waiting on it, until done is closed:
// for code under test that waits on clk in another goroutine (a retry's backoff, a re-queue waiting
// for the soonest probe), so the test neither sleeps nor guesses how long the wait is. It fails the
// test if, after a bounded number of turns, done is still open — the code neither finished nor
// waited on the clock.
func DriveClock(t testing.TB, clk *clock.Fake, step time.Duration, done <-chan struct{}) {
	t.Helper()
	for range driveTurns {
		select {
		case <-done:
			return
		default:
		}
		if clk.Timers() > 0 {
			clk.Advance(step)
			continue
		}
		runtime.Gosched()
	}
	t.Fatalf("testkit.DriveClock: after %d turns the code neither finished nor waited on the clock", driveTurns)
}

package exampletest

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Output runs an example, run printing to the writer it is given, with the test's context, and
// returns what it printed. It logs how long the run took (timings are reported, never asserted).
// It fails the test, showing the output, when run returns an error, when
// the output holds one of the secrets, or when run left a goroutine behind.
func Output(t *testing.T, secrets []string, run func(ctx context.Context, out io.Writer) error) string {
	t.Helper()
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var out bytes.Buffer
	start := time.Now()
	err := run(t.Context(), &out)
	text := out.String()
	t.Logf("the run took %v (timings are reported, not asserted)", time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("run = %v; output:\n%s", err, text)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("the output shows the password %q:\n%s", s, text)
		}
	}
	return text
}

// CheckLeaks makes the test fail if, once it has ended, a goroutine is left that was not running
// when CheckLeaks was called. Call it after setting up what the test's cleanups stop.
func CheckLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

package retry_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/retry"
	"github.com/proxybreaker/proxybreaker/transport"
)

// TestLogger: a retry the policy allows is logged at Debug, a give-up at Warn, with the exit by
// label and no password.
func TestLogger(t *testing.T) {
	var buf bytes.Buffer // CheckRetry runs on this goroutine only
	p, err := retry.New(retry.Settings{MaxWait: time.Second, Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := transport.ContextWithRetries(context.Background())
	failed := &transport.AttemptError{Exit: "dc-1", Origin: "shop.example",
		Verdict: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout}, Err: context.DeadlineExceeded}
	if ok, _ := p.CheckRetry(ctx, nil, failed); !ok {
		t.Fatalf("CheckRetry(timeout) = false, want a retry")
	}
	refused := &pool.NoHealthyExitError{Origin: "shop.example", Exits: 2, RetryIn: time.Hour}
	if ok, err := p.CheckRetry(ctx, nil, refused); ok || err == nil {
		t.Fatalf("CheckRetry(no exit for an hour) = %v, %v; want a give-up", ok, err)
	}
	out := buf.String()
	for _, want := range []string{
		"level=DEBUG msg=\"retry: retrying\" origin=shop.example exit=dc-1 class=timeout wait=0s fresh_exit=true",
		"level=WARN msg=\"retry: giving up\" origin=shop.example",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

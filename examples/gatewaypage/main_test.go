package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/examples/internal/exampletest"
)

// TestRun runs the example and checks what it says it shows: checkout's gateway session is
// banned by the shop and replaced, checkout follows it to a new address and its lease says so;
// the page groups the gateway's four live sessions under it, the banned one replaced (blocked 1),
// and neither the page nor the output holds the password or a minted session id.
func TestRun(t *testing.T) {
	var res result
	text := exampletest.Output(t, []string{gwPass}, func(ctx context.Context, out io.Writer) (err error) {
		res, err = run(ctx, out, config{Addr: "127.0.0.1:0", Requests: 4, Serve: time.Millisecond})
		return err
	})
	t.Logf("output:\n%s", text)
	if !res.Before.IsValid() || !res.After.IsValid() || res.Before == res.After || !res.Moved {
		t.Errorf("checkout: from %v to %v, moved %v; want a new address and a lease that says it moved", res.Before, res.After, res.Moved)
	}
	if res.Banned != 1 {
		t.Errorf("the shop blocked %d requests, want 1: the pool sent nothing more to the banned address", res.Banned)
	}
	gws := res.Snapshot.Gateways
	if len(gws) != 1 || len(gws[0].Sessions) != 4 || gws[0].Rotations["blocked"] != 1 {
		t.Fatalf("gateways = %+v, want res with 4 live sessions and 1 replaced for a block", gws)
	}
	for _, want := range []string{`<section id="gateways">`, `data-gateway="res"`, "blocked 1"} {
		if !strings.Contains(res.Page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, s := range gws[0].Sessions {
		if !strings.Contains(res.Page, `data-session="`+s+`"`) {
			t.Errorf("the page does not list session %s under its gateway", s)
		}
	}
	for _, secret := range []string{gwPass, "acct-session-"} {
		if strings.Contains(res.Page, secret) {
			t.Errorf("the page shows %q", secret)
		}
	}
}

// TestHelp: -h says what the example shows and how it is run.
func TestHelp(t *testing.T) {
	exampletest.CheckHelp(t, command(new(config)))
}

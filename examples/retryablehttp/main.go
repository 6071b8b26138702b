// Command retryablehttp shows a go-retryablehttp client over proxybreaker's transport with the
// retry package's hooks, self-contained on 127.0.0.1. Three scenes:
//
//  1. A pool where some exits fail (a 429 from the site, a wrong password, a dead proxy): each
//     retry goes out through an exit that has not failed the request, and every request succeeds.
//
//  2. One exit, which the site answers 429 with Retry-After: the retry finds no exit ready and
//     waits exactly until the soonest probe, then succeeds.
//
//  3. A pool whose every exit has a wrong password: each is tried once, the next attempt is
//     refused by the pool with no exit left, and the client stops at once with a clear error,
//     which errors.As sees through retryablehttp's wrapping. Three exits make four attempts, as
//     retryablehttp counts them: the refused one is an attempt too.
//
//     retryablehttp.Client → CheckRetry / Backoff / PrepareRetry (package retry)
//     → http.Client → transport.Transport → pool.Pool picks an exit → proxytest proxy → httptest site
//
// Each logical request's context comes from transport.ContextWithRetries: its *pool.Retries is
// what the request's attempts share — the exits that failed it (the pool steers around them),
// its failed attempts and the instant the next may go (the retry policy notes them).
//
// Run it with `go run ./examples/retryablehttp`; -h lists the flags. A run takes about five seconds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/examples/internal/cli"
	"github.com/proxybreaker/proxybreaker/examples/internal/world"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/retry"
	"github.com/proxybreaker/proxybreaker/transport"
)

const about = `Starts proxies and a small site on 127.0.0.1 (nothing leaves the machine) and plays three
scenes with a go-retryablehttp client over proxybreaker's transport and the retry package's
hooks: retries moving to exits that have not failed the request, a retry waiting exactly for the
soonest probe after a 429, and a pool whose every exit refuses its password stopped at once with a
clear error.`

func main() {
	var requests int
	cli.Main(command(&requests), func(ctx context.Context) error { return cli.ErrorOf(runScenes(ctx, os.Stdout, requests)) })
}

// command is the example's command line, its flag bound to requests.
func command(requests *int) *cli.Command {
	return cli.New("retryablehttp", about, func(fs *flag.FlagSet) {
		fs.IntVar(requests, "requests", 8, "how many requests scene 1 sends")
	})
}

// result is what a run came to, for the test.
type result struct {
	Scene1OK       int           // scene 1 requests that succeeded through a healthy exit
	Scene1Repeats  int           // scene 1 requests that went through one exit twice
	Scene2Wait     time.Duration // how long scene 2's retry waited for the soonest probe
	Scene2Probe    time.Duration // the soonest probe the transport reported
	Scene3Err      error
	Scene3Attempts int // the client's attempts in scene 3, the one the pool refused included
	Scene3Sent     int // those of them that reached a proxy (each answered 407)
}

// runScenes plays the three scenes, printing to out, and returns what they came to. Its requests
// end when ctx does.
func runScenes(ctx context.Context, out io.Writer, requests int) (result, error) {
	var res result
	wld := world.New()
	defer wld.Close()
	var alone atomic.Int32 // requests through res-capped-alone
	site := wld.AddSite("site", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The site rate-limits two exits: res-capped always, res-capped-alone on its first request.
		via, _ := wld.Registry.Lookup(r)
		if via == "res-capped" || (via == "res-capped-alone" && alone.Add(1) == 1) {
			w.Header().Set("Retry-After", "2")
			http.Error(w, "too many requests", http.StatusTooManyRequests)
			return
		}
		fmt.Fprintf(w, "item %s via %s", strings.TrimPrefix(r.URL.Path, "/item/"), via)
	}))
	fmt.Fprintf(out, "site %s\n", site.URL)

	// Scene 1.
	fmt.Fprintln(out, "\n1. retries move to exits that have not failed the request")
	exits1, err := wld.StartExits(
		world.ExitSpec{Name: "dc-1"}, world.ExitSpec{Name: "dc-2"},
		world.ExitSpec{Name: "res-capped"},
		withWrongPass("auth-bad", "bob"),
		world.ExitSpec{Name: "dead", Dead: true},
	)
	if err != nil {
		return res, err
	}
	obs := &attempts{byReq: map[int][]string{}}
	p1, err := pool.New(pool.WithExits(exits1...))
	if err != nil {
		return res, err
	}
	tr1, err := transport.New(p1, transport.WithObserver(obs))
	if err != nil {
		return res, err
	}
	defer tr1.Close()
	c1, _, err := newClient(tr1)
	if err != nil {
		return res, err
	}
	for i := range requests {
		ctx := context.WithValue(transport.ContextWithRetries(ctx), reqKey{}, i)
		body, exit, err := get(ctx, c1, fmt.Sprintf("%s/item/%d", site.URL, i))
		tried := obs.of(i)
		if err != nil {
			fmt.Fprintf(out, "   GET /item/%d: %v\n", i, err)
			continue
		}
		if strings.HasPrefix(exit, "dc-") && strings.HasSuffix(body, exit) {
			res.Scene1OK++
		}
		seen := map[string]bool{}
		for _, t := range tried {
			if seen[t] {
				res.Scene1Repeats++
			}
			seen[t] = true
		}
		fmt.Fprintf(out, "   GET /item/%d: %q, attempts: %s\n", i, body, strings.Join(obs.described(i), " → "))
	}

	// Scene 2.
	fmt.Fprintln(out, "\n2. no exit ready: the retry waits for the soonest probe")
	exits2, err := wld.StartExits(world.ExitSpec{Name: "res-capped-alone"})
	if err != nil {
		return res, err
	}
	p2, err := pool.New(pool.WithExits(exits2...),
		// A short base cooldown, so that the Retry-After (2 s) sets the OPEN window.
		pool.WithPairSettings(breaker.Settings{BaseCooldown: 500 * time.Millisecond}))
	if err != nil {
		return res, err
	}
	tr2, err := transport.New(p2)
	if err != nil {
		return res, err
	}
	defer tr2.Close()
	c2, policy2, err := newClient(tr2)
	if err != nil {
		return res, err
	}
	var waited time.Duration
	c2.PrepareRetry = func(r *http.Request) error {
		start := time.Now()
		err := policy2.PrepareRetry(r)
		waited += time.Since(start)
		return err
	}
	c2.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		var nh *pool.NoHealthyExitError
		if errors.As(err, &nh) {
			res.Scene2Probe = nh.RetryIn
			fmt.Fprintf(out, "   attempt refused: %v\n", nh)
		} else if resp != nil && resp.Header.Get("Retry-After") != "" {
			fmt.Fprintf(out, "   attempt answered %s, Retry-After: %s\n", resp.Status, resp.Header.Get("Retry-After"))
		} else if resp != nil {
			fmt.Fprintf(out, "   attempt answered %s\n", resp.Status)
		}
		return policy2.CheckRetry(ctx, resp, err)
	}
	start := time.Now()
	body, _, err := get(transport.ContextWithRetries(ctx), c2, site.URL+"/item/42")
	if err != nil {
		return res, fmt.Errorf("scene 2: %w", err)
	}
	res.Scene2Wait = waited
	fmt.Fprintf(out, "   %q after %v, of which %v waiting for the soonest probe\n",
		body, time.Since(start).Round(10*time.Millisecond), waited.Round(10*time.Millisecond))

	// Scene 3.
	fmt.Fprintln(out, "\n3. every exit refuses its credentials (407): stop at once, with a clear error")
	bad := []world.ExitSpec{withWrongPass("bad-1", "alice"), withWrongPass("bad-2", "bob"), withWrongPass("bad-3", "carol")}
	exits3, err := wld.StartExits(bad...)
	if err != nil {
		return res, err
	}
	p3, err := pool.New(pool.WithExits(exits3...))
	if err != nil {
		return res, err
	}
	tr3, err := transport.New(p3)
	if err != nil {
		return res, err
	}
	defer tr3.Close()
	c3, _, err := newClient(tr3)
	if err != nil {
		return res, err
	}
	c3.RetryMax = 10
	c3.RequestLogHook = func(_ retryablehttp.Logger, _ *http.Request, _ int) { res.Scene3Attempts++ }
	start = time.Now()
	_, _, err = get(transport.ContextWithRetries(ctx), c3, site.URL+"/item/7")
	res.Scene3Err = err
	for _, sp := range bad {
		res.Scene3Sent += int(wld.Proxy(sp.Name).Rejected())
	}
	// retryablehttp counts every attempt, the one the pool refused before sending it included.
	fmt.Fprintf(out, "   after %v and %d attempts (%d through the exits, each answered 407; %d refused by the pool, no exit being left):\n   %v\n",
		time.Since(start).Round(time.Millisecond), res.Scene3Attempts, res.Scene3Sent, res.Scene3Attempts-res.Scene3Sent, err)
	var giveUp *retry.GiveUpError
	var noExit *pool.NoHealthyExitError
	if errors.As(err, &giveUp) && errors.As(err, &noExit) {
		fmt.Fprintf(out, "   errors.As: *retry.GiveUpError (%d failed attempts), *pool.NoHealthyExitError (retry in %v)\n",
			len(giveUp.Failures), noExit.RetryIn.Round(time.Second))
	}
	return res, nil
}

// newClient returns a retryablehttp client over tr with a fresh retry.Policy's hooks, waiting on
// the clock of tr's pool.
func newClient(tr *transport.Transport) (*retryablehttp.Client, *retry.Policy, error) {
	p, err := retry.New(retry.Settings{Clock: tr.Pool().Clock()})
	if err != nil {
		return nil, nil, err
	}
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.HTTPClient = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	c.RetryWaitMin, c.RetryWaitMax, c.RetryMax = 50*time.Millisecond, 10*time.Second, 6
	c.CheckRetry, c.Backoff, c.PrepareRetry = p.CheckRetry, p.Backoff, p.PrepareRetry
	return c, p, nil
}

// get sends one logical request and reads the body.
func get(ctx context.Context, c *retryablehttp.Client, u string) (body, exit string, err error) {
	req, err := retryablehttp.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return "", "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if e := transport.ExitFromResponse(resp); e != nil {
		exit = e.Label()
	}
	return string(b), exit, err
}

type reqKey struct{}

// attempts records, per request (reqKey), the exits its attempts went through and how they ended.
type attempts struct {
	transport.NopObserver
	mu    sync.Mutex
	byReq map[int][]string
	desc  map[int][]string
}

func (a *attempts) AttemptFinished(ctx context.Context, r transport.AttemptResult) {
	id, ok := ctx.Value(reqKey{}).(int)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.desc == nil {
		a.desc = map[int][]string{}
	}
	a.byReq[id] = append(a.byReq[id], r.Exit.Label())
	a.desc[id] = append(a.desc[id], fmt.Sprintf("%s (%s)", r.Exit.Label(), r.Verdict.Class))
}

func (a *attempts) of(id int) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.byReq[id]...)
}

func (a *attempts) described(id int) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.desc[id]...)
}

// withWrongPass is an exit whose proxy demands user's password, "right-"+user, and which dials
// with "wrong-"+user: the proxy answers 407.
func withWrongPass(name, user string) world.ExitSpec {
	return world.ExitSpec{Name: name, User: user, Pass: "right-" + user, WrongPass: "wrong-" + user}
}

package clientstest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/proxybreaker/proxybreaker/internal/servertest"
	"github.com/proxybreaker/proxybreaker/proxyd"
)

// startChromium starts headless Chromium with its proxy set to proxy (an http:// URL), a fresh
// profile, and everything that would reach past the machine turned off; it returns a context
// holding the browser, stopped when the test ends.
//
// Chromium sends no user:pass from --proxy-server and bypasses the proxy for loopback targets
// unless told <-loopback>: so the daemon's options reach it through a profile listener.
func startChromium(t *testing.T, proxy string) context.Context {
	t.Helper()
	bin := servertest.ClientBinary(t, "chromium", "/usr/bin/chromium")
	dir := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox, // tests may run as root, where Chromium refuses its sandbox
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(dir),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("proxy-server", proxy),
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		// The HTTPS sites' certificate is the test's own; the tunnel is what is under test.
		chromedp.Flag("ignore-certificate-errors", true),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(func() { bcancel(); acancel() }) // before TempDir's removal: cleanups run last first
	// The first action that needs a tab opens it and binds it to the context it runs on, so it
	// runs on bctx, with no deadline; later actions may carry their own.
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return bctx
}

// load navigates the browser's tab to u and returns the page's title ("" when the navigation
// failed, as a 4xx page without a title may).
func load(t *testing.T, ctx context.Context, u string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
		t.Logf("chromium: navigating to %s: %v", u, err)
		return ""
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		return ""
	}
	return title
}

// TestChromiumThroughAProfileListener: headless Chromium points --proxy-server at a listener whose
// profile fixes country-us, and loads a page set from two plain-HTTP sites and one HTTPS site
// (CONNECT tunnels). The first site answers exit a Cloudflare's challenge: the daemon judges it
// and the site stops seeing a, while the second site still does. No site ever sees exit e, the one
// exit outside the profile's country.
func TestChromiumThroughAProfileListener(t *testing.T) {
	banned, other, secure := newSite(t, false, 4), newSite(t, false, 4), newSite(t, true, 4)
	banned.banSource(srcA, challenge)
	w := newWorld(t, worldConfig{germany: true, profiles: []string{"country-us"}})
	ctx := startChromium(t, "http://"+w.profiles["country-us"])
	const n = 24
	titled := 0
	for i := range n {
		want := fmt.Sprintf("page %d", i%4)
		if load(t, ctx, fmt.Sprintf("%s/p/%d", banned.URL(), i%4)) == want {
			titled++
		}
		if got := load(t, ctx, fmt.Sprintf("%s/p/%d?n=%d", other.URL(), i%4, i)); got != want {
			t.Fatalf("chromium other site #%d: title %q, want %q", i, got, want)
		}
	}
	for i := range 4 {
		want := fmt.Sprintf("page %d", i)
		if got := load(t, ctx, fmt.Sprintf("%s/p/%d", secure.URL(), i)); got != want {
			t.Errorf("chromium https page %d: title %q, want %q", i, got, want)
		}
	}
	checkRoutedAround(t, banned, other, srcA, 4, 12)
	if titled < n-4 {
		t.Errorf("chromium loaded %d real pages of %d from the banning site, want at least %d", titled, n, n-4)
	}
	if secure.total() < 4 {
		t.Errorf("the HTTPS site saw %d requests, want at least 4", secure.total())
	}
	for _, s := range []*site{banned, other, secure} {
		if c := s.count(srcE); c != 0 {
			t.Errorf("a site saw exit e (country=de) %d times through the country-us listener", c)
		}
	}
}

// answerProxyAuth makes the browser's tab answer every proxy 407 with user and pass, through
// the DevTools Fetch domain (Chromium's own credential prompt, headless), and continue every
// other paused request. It returns a counter of the challenges answered.
func answerProxyAuth(t *testing.T, ctx context.Context, user, pass string) *atomic.Int64 {
	t.Helper()
	var answered atomic.Int64
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	auths := chromedp.Events(ctx, fetch.AuthRequired)
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		}
	}()
	go func() {
		for ev, err := range auths {
			if err != nil {
				return
			}
			resp := &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseCancelAuth}
			if ev.AuthChallenge != nil && ev.AuthChallenge.Source == fetch.AuthChallengeSourceProxy {
				resp = &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseProvideCredentials, Username: user, Password: pass}
				answered.Add(1)
			}
			chromedp.Call(ctx, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{RequestID: ev.RequestID, AuthChallengeResponse: resp})
		}
	}()
	handle := true
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{HandleAuthRequests: &handle}); err != nil {
		t.Fatalf("enabling the Fetch domain: %v", err)
	}
	return &answered
}

// TestChromiumOptionsThroughThe407Challenge: the other way to steer the daemon from a browser. The
// daemon demands credentials, so it answers Chromium's first request 407 with Proxy-Authenticate;
// Chromium then sends the username it is given — "acct-exit-b", options and all — and every page,
// plain HTTP and HTTPS through CONNECT, leaves through exit b, as the sites count.
func TestChromiumOptionsThroughThe407Challenge(t *testing.T) {
	plain, secure := newSite(t, false, 3), newSite(t, true, 3)
	w := newWorld(t, worldConfig{credentials: []proxyd.Credential{{User: "acct", Pass: "s3cret"}}})
	ctx := startChromium(t, "http://"+w.addr)
	answered := answerProxyAuth(t, ctx, "acct-exit-b", "s3cret")
	for i := range 3 {
		for _, s := range []*site{plain, secure} {
			want := fmt.Sprintf("page %d", i)
			if got := load(t, ctx, fmt.Sprintf("%s/p/%d", s.URL(), i)); got != want {
				t.Errorf("chromium %s/p/%d: title %q, want %q", s.URL(), i, got, want)
			}
		}
	}
	if answered.Load() == 0 {
		t.Error("chromium was never challenged: the daemon let it through without credentials")
	}
	for _, s := range []*site{plain, secure} {
		if got := s.count(srcB); got != 3 || s.total() != 3 {
			t.Errorf("site %s saw %v, want its 3 pages all from exit b (%s)", s.URL(), s.sources(), srcB)
		}
	}
}

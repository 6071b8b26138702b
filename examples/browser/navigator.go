package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// This file is the part of the example to copy into a scraper: a Navigator that sends headless
// Chromium's navigations through the exits a pool.Pool picks and reports what each one showed.
// A browser cannot use an http.RoundTripper, so it does by hand what transport.Transport does:
//
//	Navigator.Navigate → pool.Pool.Pick(Request{Origin}) → lease on an exit
//	  → Target.createBrowserContext{proxyServer: the exit, proxyBypassList: <-loopback>} → new tab
//	  → Fetch.enable{handleAuthRequests}: Fetch.authRequired from the proxy → Fetch.continueWithAuth
//	    with the exit's credentials (Chromium takes none in a proxy address)
//	  → Page.navigate → Network.responseReceived (the main document) → Network.getResponseBody
//	  → transport.Classifier (status, headers, body) or the net::ERR_ text → pool.Verdict
//	  → Lease.Report → breakers

// DefaultNavigationTimeout bounds one navigation, from Page.navigate to the verdict.
const DefaultNavigationTimeout = 10 * time.Second

// tabSetupTimeout bounds opening a tab and its browser context, which only the browser does (no
// exit is involved yet): a browser that takes longer has failed, and no exit is blamed for it.
const tabSetupTimeout = 30 * time.Second

// bypassNothing makes every request of a browser context go through its proxy, loopback ones
// included: Chromium sends localhost and 127.0.0.1 direct unless told otherwise, and a navigation
// that goes direct is one that no exit carried.
const bypassNothing = "<-loopback>"

// NavigatorConfig tunes a Navigator. The zero value is ready to use.
type NavigatorConfig struct {
	// Timeout bounds each navigation, from Page.navigate on: opening the tab before it is the
	// browser's work and is bounded apart. When it passes, the exit is blamed (a timeout, as a
	// transport's header timeout does); when the caller's context ends first, nobody is.
	// Default DefaultNavigationTimeout.
	Timeout time.Duration
	// Classifier judges the main document's response (status, headers and body), as it judges an
	// HTTP response in transport.Transport. Default transport.DefaultClassifier.
	Classifier transport.Classifier
	// OriginKey keys navigations by origin for the pool. Default transport.OriginHost.
	OriginKey transport.OriginFunc
}

// Navigator opens pages in a running headless Chromium through the exits of a pool: one fresh browser
// context per navigation, whose proxy is the exit the pool picked, and one verdict per navigation
// reported on its lease. It is safe for concurrent use: navigations share nothing but the browser
// process.
type Navigator struct {
	pool    *pool.Pool
	browser context.Context
	cfg     NavigatorConfig
}

// NewNavigator returns a Navigator over p that opens tabs in the browser held by browserCtx, a
// chromedp context whose browser has started (chromedp.Run has run on it). The browser must outlive
// the Navigator's navigations.
func NewNavigator(p *pool.Pool, browserCtx context.Context, cfg NavigatorConfig) (*Navigator, error) {
	if p == nil {
		return nil, errors.New("browser: NewNavigator: nil pool")
	}
	if c := chromedp.FromContext(browserCtx); c == nil || c.Browser == nil {
		return nil, errors.New("browser: NewNavigator: the context holds no running browser")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("browser: NewNavigator: negative Timeout %v", cfg.Timeout)
	}
	return &Navigator{pool: p, browser: browserCtx, cfg: cfg.withDefaults()}, nil
}

// withDefaults returns c with its zero fields set to their defaults.
func (c NavigatorConfig) withDefaults() NavigatorConfig {
	if c.Timeout == 0 {
		c.Timeout = DefaultNavigationTimeout
	}
	if c.Classifier == nil {
		c.Classifier = transport.DefaultClassifier
	}
	if c.OriginKey == nil {
		c.OriginKey = transport.OriginHost
	}
	return c
}

// Result is one navigation: which exit carried it, what the main document was and the verdict
// reported for it.
type Result struct {
	URL    string
	Origin string        // the origin key the pool judged
	Exit   string        // the label of the exit that carried it; never its credentials
	Status int           // the main document's HTTP status; 0 when none arrived
	Header http.Header   // the main document's response headers; nil when none arrived
	Body   []byte        // the main document as received; nil when none arrived
	Took   time.Duration // from the pick to the verdict
	// Verdict is what was reported on the lease.
	Verdict pool.Verdict
	// Err is why no document arrived: a *chromedp.LoadError (net::ERR_…), a timeout. Nil when one
	// did, whatever its status.
	Err error
}

// Navigate picks an exit for rawURL's origin, opens a fresh browser context whose proxy is that
// exit, navigates to rawURL and reports the verdict on the lease. retries, when not nil, is the
// memory of one logical navigation (see pool.Request.Retries): the pick avoids the exits that
// failed it, and a failure is added to it.
//
// Like http.RoundTripper, Navigate returns a nil error whenever the navigation was attempted:
// Result.Err and Result.Verdict say how it went, a 407 from a proxy included. It returns an error
// when rawURL is not an http(s) URL, when the pool refused the pick (a *pool.NoHealthyExitError,
// an *pool.OriginUnhealthyError or a *pool.ThrottledError), when the exit's proxy cannot be given
// to Chromium, or when the browser could not open a tab; the lease is then released unjudged.
func (n *Navigator) Navigate(ctx context.Context, rawURL string, retries *pool.Retries) (Result, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Result{URL: rawURL}, fmt.Errorf("browser: navigate: want an http or https URL, got %q", pool.RedactRaw(rawURL))
	}
	res := Result{URL: u.String(), Origin: n.cfg.OriginKey(u)}
	start := time.Now()
	lease, err := n.pool.Pick(ctx, pool.Request{Origin: res.Origin, Retries: retries})
	if err != nil {
		return res, err
	}
	exit := lease.Exit()
	res.Exit = exit.Label()
	server, creds, err := proxyServer(exit)
	if err != nil {
		lease.Release()
		return res, err
	}

	nav, err := n.open(ctx, res.URL, server, creds)
	res.Took = time.Since(start)
	if err != nil {
		lease.Release()
		return res, fmt.Errorf("browser: exit %s: %w", res.Exit, err)
	}
	res.Status, res.Err = nav.status, nav.err
	if nav.doc != nil {
		res.Header, res.Body = nav.header, nav.body
	}
	res.Verdict = n.judge(ctx, nav, exit, res.Origin)
	lease.Report(res.Verdict)
	return res, nil
}

// navigation is what one tab saw.
type navigation struct {
	doc    *network.Response // the main document's response; nil if none arrived
	status int
	header http.Header
	body   []byte
	err    error // the navigation's error, if it failed

	proxyAuthRejected bool // the proxy asked again after it was given the exit's credentials, or had none to ask for
	callerDone        bool // the caller's context ended
	timedOut          bool // the navigation's own timeout passed
}

// open opens a browser context through server, navigates to rawURL and collects what happened. Its
// error is the browser's failure, not the navigation's: a navigation that failed is a navigation.
func (n *Navigator) open(ctx context.Context, rawURL, server string, creds *url.Userinfo) (*navigation, error) {
	// The tab's context derives from the browser's (that is where chromedp finds the browser) and
	// ends with the caller's, when the tab takes too long to open, or when the navigation's own
	// timeout passes: its timer starts once the tab is ready, so that a browser slow to open tabs
	// (a loaded machine) is not taken for a slow exit.
	navCtx, cancelNav := context.WithCancel(n.browser)
	defer cancelNav()
	stopAfter := context.AfterFunc(ctx, cancelNav)
	defer stopAfter()
	var setupExpired, navExpired atomic.Bool
	setup := time.AfterFunc(tabSetupTimeout, func() { setupExpired.Store(true); cancelNav() })
	defer setup.Stop()

	tabCtx, closeTab := chromedp.NewContext(navCtx, chromedp.WithNewBrowserContext(
		func(p *target.CreateBrowserContextParams) {
			p.ProxyServer = server
			p.ProxyBypassList = bypassNothing
		}))
	nav := &navigation{}
	var handlers sync.WaitGroup
	defer func() {
		closeTab() // closes the tab and disposes of its browser context; the handlers' iterators end
		handlers.Wait()
	}()
	// failed says why the tab could not be set up: the caller gave up, or the browser failed.
	failed := func(step string, err error) error {
		if ctx.Err() != nil {
			nav.callerDone = true
			return fmt.Errorf("%s: %w", step, ctx.Err())
		}
		if setupExpired.Load() {
			return fmt.Errorf("%s: the browser took over %v: %w", step, tabSetupTimeout, err)
		}
		return fmt.Errorf("%s: %w", step, err)
	}
	if err := chromedp.Do(tabCtx); err != nil { // create the browser context and the tab
		return nil, failed("opening a tab", err)
	}
	mainFrame := chromedp.FromContext(tabCtx).Target.TargetID // a page's main frame has its target's ID

	// The main document's response, seen on the goroutine that reads the tab's messages: it must be
	// quick, and it sees the event before the navigation's load event returns.
	var mu sync.Mutex
	var docs []*network.EventResponseReceived
	if err := chromedp.Listen(tabCtx, func(ev any) {
		if e, ok := ev.(*network.EventResponseReceived); ok && e.Type == network.ResourceTypeDocument &&
			string(e.FrameID) == string(mainFrame) {
			mu.Lock()
			docs = append(docs, e)
			mu.Unlock()
		}
	}); err != nil {
		return nil, failed("listening", err)
	}

	// With the Fetch domain on, every request pauses until continued, and a proxy's 407 pauses it
	// again until answered: the handlers run on goroutines of their own, since a listener must not
	// send commands. Subscribe before enabling, so that no event is missed.
	var rejected atomic.Bool
	paused := chromedp.Events(tabCtx, fetch.RequestPaused)
	auths := chromedp.Events(tabCtx, fetch.AuthRequired)
	handlers.Add(2)
	go func() {
		defer handlers.Done()
		for ev, err := range paused {
			if err != nil {
				return
			}
			chromedp.Call(tabCtx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		}
	}()
	go func() {
		defer handlers.Done()
		answered := map[fetch.RequestID]bool{}
		for ev, err := range auths {
			if err != nil {
				return
			}
			chromedp.Call(tabCtx, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{
				RequestID:             ev.RequestID,
				AuthChallengeResponse: answerChallenge(&ev, creds, answered, &rejected),
			})
		}
	}()
	handle := true
	if _, err := chromedp.Call(tabCtx, fetch.Enable, fetch.EnableParams{HandleAuthRequests: &handle}); err != nil {
		return nil, failed("enabling the Fetch domain", err)
	}
	if !setup.Stop() {
		return nil, failed("opening a tab", context.DeadlineExceeded)
	}
	navTimer := time.AfterFunc(n.cfg.Timeout, func() { navExpired.Store(true); cancelNav() })
	defer navTimer.Stop()

	navErr := chromedp.Do(tabCtx, chromedp.Navigate(rawURL))
	nav.proxyAuthRejected = rejected.Load()
	mu.Lock()
	var doc *network.EventResponseReceived
	if len(docs) > 0 {
		doc = docs[0]
	}
	mu.Unlock() // before any command: the listener takes mu on the goroutine that reads the replies
	if doc != nil {
		nav.doc = doc.Response
		nav.status, nav.header = int(doc.Response.Status), httpHeader(doc.Response.Headers)
		// The body, for the classifier's challenge-page detectors. Chromium may have kept none (a
		// response it did not render); the status and headers are judged then.
		body, err := chromedp.Call(tabCtx, network.GetResponseBody, network.GetResponseBodyParams{RequestID: doc.RequestID})
		if err == nil {
			nav.body = body.Body
		}
	}
	if navErr != nil {
		// A response without a load (an error status with no body, a page whose subresources
		// hang) is still a response: the verdict judges it, and Err says what happened next.
		n.ended(ctx, &navExpired, nav, navErr)
	}
	return nav, nil
}

// ended records err as the navigation's error and notes whether the caller gave up or the
// navigation's timeout passed.
func (n *Navigator) ended(ctx context.Context, navExpired *atomic.Bool, nav *navigation, err error) {
	nav.err = err
	switch {
	case ctx.Err() != nil:
		nav.callerDone = true
	case navExpired.Load():
		nav.timedOut = true
		nav.err = fmt.Errorf("no page within %v: %w", n.cfg.Timeout, err)
	}
}

// answerChallenge answers one Fetch.authRequired event: the exit's credentials for the first
// challenge a proxy makes on a request, and a cancel for any other (a proxy that asks again rejected
// them; a web site never gets the proxy's credentials). A proxy challenge that is not answered with
// credentials marks the exit's credentials rejected.
func answerChallenge(ev *fetch.EventAuthRequired, creds *url.Userinfo, answered map[fetch.RequestID]bool, rejected *atomic.Bool) *fetch.AuthChallengeResponse {
	cancel := &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseCancelAuth}
	if ev.AuthChallenge == nil || ev.AuthChallenge.Source != fetch.AuthChallengeSourceProxy {
		return cancel
	}
	if creds == nil || answered[ev.RequestID] {
		rejected.Store(true)
		return cancel
	}
	answered[ev.RequestID] = true
	pass, _ := creds.Password()
	return &fetch.AuthChallengeResponse{
		Response: fetch.AuthChallengeResponseResponseProvideCredentials,
		Username: creds.Username(),
		Password: pass,
	}
}

// judge turns what a tab saw into a verdict, as transport.DefaultClassifier judges an HTTP attempt.
func (n *Navigator) judge(ctx context.Context, nav *navigation, exit *pool.Exit, origin string) pool.Verdict {
	switch {
	case nav.callerDone:
		return pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled}
	case nav.proxyAuthRejected:
		return pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}
	case nav.doc != nil:
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, nav.doc.URL, nil)
		if err != nil {
			req = nil
		}
		size := int64(len(nav.body)) // Chromium hands the body over decoded and whole
		if nav.body == nil {
			size = -1 // it kept none
		}
		resp := &http.Response{
			Status:        fmt.Sprintf("%d %s", nav.status, nav.doc.StatusText),
			StatusCode:    nav.status,
			Proto:         "HTTP/1.1",
			ProtoMajor:    1,
			ProtoMinor:    1,
			Header:        nav.header,
			Body:          io.NopCloser(bytes.NewReader(nav.body)),
			ContentLength: size,
			Request:       req,
		}
		return n.cfg.Classifier.Classify(&transport.Attempt{
			Request: req, Response: resp, Exit: exit, Origin: origin, Now: n.pool.Clock().Now(),
		})
	case nav.timedOut:
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true}
	}
	var le *chromedp.LoadError
	if errors.As(nav.err, &le) {
		return verdictForNetError(le.ErrorText)
	}
	return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassError}
}

// verdictForNetError judges a navigation that failed with Chromium's error text (net::ERR_…, see
// Chromium's net/base/net_error_list.h), the way transport.DefaultClassifier judges the Go error of
// an HTTP attempt.
//
// One difference: Chromium reports a proxy it cannot connect to as ERR_PROXY_CONNECTION_FAILED,
// whether the connection was refused, timed out or the proxy's name did not resolve, where the
// transport tells them apart (refused and unresolvable park the exit). Here it is a transient,
// connection-level failure: the pair's breaker trips, and the exit's own breaker takes the exit
// out once such failures pile up across origins.
func verdictForNetError(text string) pool.Verdict {
	conn := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassConnection, ConnLevel: true}
	switch strings.TrimPrefix(text, "net::") {
	case "ERR_PROXY_CONNECTION_FAILED", "ERR_CONNECTION_RESET", "ERR_CONNECTION_CLOSED",
		"ERR_CONNECTION_ABORTED", "ERR_CONNECTION_FAILED", "ERR_CONNECTION_REFUSED",
		"ERR_EMPTY_RESPONSE", "ERR_SOCKET_NOT_CONNECTED", "ERR_NETWORK_CHANGED",
		"ERR_INCOMPLETE_CHUNKED_ENCODING", "ERR_CONTENT_LENGTH_MISMATCH", "ERR_ADDRESS_UNREACHABLE":
		return conn
	case "ERR_TIMED_OUT", "ERR_CONNECTION_TIMED_OUT":
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true}
	case "ERR_PROXY_AUTH_UNSUPPORTED", "ERR_PROXY_AUTH_REQUESTED", "ERR_UNEXPECTED_PROXY_AUTH",
		"ERR_PROXY_AUTH_REQUESTED_WITH_NO_CONNECTION", "ERR_MANDATORY_PROXY_CONFIGURATION_FAILED":
		return pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}
	case "ERR_TUNNEL_CONNECTION_FAILED":
		// The proxy answered the CONNECT with something other than 200 or 407; mostly that it
		// could not reach the target, which counts half, as a CONNECT 502 does.
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassUpstream, Soft: true}
	case "ERR_NAME_NOT_RESOLVED", "ERR_NAME_RESOLUTION_FAILED":
		return pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassOriginDNS}
	case "ERR_ABORTED", "ERR_BLOCKED_BY_CLIENT", "ERR_BLOCKED_BY_RESPONSE", "ERR_INVALID_URL",
		"ERR_UNSAFE_PORT", "ERR_DISALLOWED_URL_SCHEME":
		// The browser stopped it, not the network (a download, a policy): it says nothing of the exit.
		return pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassError}
	}
	if strings.Contains(text, "ERR_CERT_") || strings.Contains(text, "ERR_SSL_") {
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTLS, ConnLevel: true}
	}
	return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassError}
}

// proxyServer returns the exit's proxy as Chromium takes it in a proxy address (scheme://host:port,
// without credentials; "direct://" for a direct exit) and the credentials to answer its challenges
// with. Chromium cannot log in to a SOCKS5 proxy, so a SOCKS5 exit with credentials is an error.
func proxyServer(e *pool.Exit) (server string, creds *url.Userinfo, err error) {
	u := e.ProxyURL()
	switch e.Scheme() {
	case pool.SchemeDirect:
		return "direct://", nil, nil // Chromium's word for no proxy
	case pool.SchemeHTTP, pool.SchemeHTTPS:
		return e.Scheme() + "://" + u.Host, u.User, nil
	case pool.SchemeSOCKS5, pool.SchemeSOCKS5H:
		// Chromium's socks5:// resolves names through the proxy, as socks5h does.
		if u.User != nil {
			return "", nil, fmt.Errorf("browser: exit %s: Chromium cannot log in to a SOCKS5 proxy", e.Label())
		}
		return "socks5://" + u.Host, nil, nil
	}
	return "", nil, fmt.Errorf("browser: exit %s: unsupported proxy scheme %q", e.Label(), e.Scheme())
}

// httpHeader converts the headers Chromium reports, which joins repeated headers with newlines.
func httpHeader(h network.Headers) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		s, ok := v.(string)
		if !ok {
			s = fmt.Sprint(v)
		}
		for _, line := range strings.Split(s, "\n") {
			out.Add(k, line)
		}
	}
	return out
}

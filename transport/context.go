package transport

import (
	"context"
	"net/http"

	"github.com/proxybreaker/proxybreaker/pool"
)

type ctxKey int

const (
	exitKey ctxKey = iota
	attemptKey
	sessionKey
	retriesKey
	pinKey
	bodyPaceKey
	wantKey
)

// ContextWithExit returns a context whose requests go through the exit labelled label and no
// other (pool.Request.Exit): if that exit's breakers or buckets do not admit the request, RoundTrip
// fails (or waits for the exit's token) rather than picking another. A reheat loop probes through it.
func ContextWithExit(ctx context.Context, label string) context.Context {
	return context.WithValue(ctx, pinKey, label)
}

// ContextWithSession returns a context whose requests stick to one exit per origin
// (pool.Request.Session): later requests of the session reuse the exit the first one got until
// that exit's breakers leave CLOSED. Use it for logins and carts that must keep one IP.
func ContextWithSession(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, sessionKey, key)
}

// ContextWithWant returns a context whose requests go out only through exits that have what w
// wants (pool.Request.Want): ContextWithWant(ctx, pool.MustParseWant("country=us")) for a site
// that serves US visitors only. When no exit of the pool matches, RoundTrip fails with a
// *pool.NoMatchingExitError (a configuration fault); when every matching exit is cooling, with a
// *pool.NoHealthyExitError (RetryIn) — never through an exit that does not match. Build w once and
// reuse it. A nil w removes the constraint.
func ContextWithWant(ctx context.Context, w *pool.Want) context.Context {
	return context.WithValue(ctx, wantKey, w)
}

// WantFromContext returns the *pool.Want ContextWithWant put in ctx, or nil.
func WantFromContext(ctx context.Context) *pool.Want {
	w, _ := ctx.Value(wantKey).(*pool.Want)
	return w
}

// ContextWithRetries returns a context for one logical request whose attempts share a
// *pool.Retries: a retry goes out through an exit that has not failed the request while one is
// ready. Retry layers (packages collyext and retry) call it once per logical request; a context
// that already has one is returned as it is.
func ContextWithRetries(ctx context.Context) context.Context {
	if RetriesFromContext(ctx) != nil {
		return ctx
	}
	return context.WithValue(ctx, retriesKey, pool.NewRetries())
}

// RetriesFromContext returns the *pool.Retries ContextWithRetries put in ctx, or nil.
func RetriesFromContext(ctx context.Context) *pool.Retries {
	r, _ := ctx.Value(retriesKey).(*pool.Retries)
	return r
}

// request returns what a pick for req needs from its context.
func request(ctx context.Context, origin string) pool.Request {
	r := pool.Request{Origin: origin}
	r.Exit, _ = ctx.Value(pinKey).(string)
	r.Session, _ = ctx.Value(sessionKey).(string)
	r.Retries = RetriesFromContext(ctx)
	r.Want = WantFromContext(ctx)
	return r
}

// ExitFromContext returns the exit the transport picked for the request whose context this is.
// A custom base RoundTripper (WithBase) must send the request through it.
func ExitFromContext(ctx context.Context) (*pool.Exit, bool) {
	e, ok := ctx.Value(exitKey).(*pool.Exit)
	return e, ok && e != nil
}

// ExitFromResponse returns the exit that carried resp, or nil if resp did not come through a
// Transport.
func ExitFromResponse(resp *http.Response) *pool.Exit {
	if resp == nil || resp.Request == nil {
		return nil
	}
	e, _ := ExitFromContext(resp.Request.Context())
	return e
}

// VerdictFromResponse returns how the transport classified resp when its headers arrived: the
// class of a 429 (rate_limited), a challenge page (blocked, with the Detector), a 407 from the proxy
// (proxy_auth), and so on, with a plain 403 as the pool judged it then (pool.Verdict.Suspect): a ban
// is blocked (Detector "forbidden"), the verdict the breakers count and observers see. ok is false
// if resp did not come through a Transport. A success can still turn into a body_read failure if
// the body dies mid-read; observers see that final verdict.
func VerdictFromResponse(resp *http.Response) (v pool.Verdict, ok bool) {
	a := attemptOf(resp)
	if a == nil {
		return pool.Verdict{}, false
	}
	return a.verdict, true
}

// attemptOf returns the attempt that brought resp, or nil.
func attemptOf(resp *http.Response) *attempt {
	if resp == nil || resp.Request == nil {
		return nil
	}
	a, _ := resp.Request.Context().Value(attemptKey).(*attempt)
	return a
}

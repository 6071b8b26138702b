package transport

import (
	"fmt"
	"net"
	"net/http"
	"time"
)

// Defaults of the options and of the classifier.
const (
	// DefaultHeaderTimeout is how long an attempt may wait for its response headers by default.
	DefaultHeaderTimeout = 15 * time.Second
	// DefaultPeekLimit is how much of a suspicious body the default classifier reads to look for a
	// challenge page: challenge pages announce themselves in their first few KiB.
	DefaultPeekLimit = 4 << 10
	// DefaultMaxResponseHeaderBytes is how many bytes of response headers DefaultBaseTemplate accepts
	// per attempt: 256 KiB, Chrome's own limit (net::ERR_RESPONSE_HEADERS_TOO_BIG), so any site a
	// browser can load, big cookies included, loads through an exit too. Real sites send a few KiB; a
	// session with many large Set-Cookie headers reaches tens of KiB. net/http's default, 10 MiB, lets
	// one hostile or broken origin make every attempt buffer 10 MiB before the caller sees a byte;
	// 256 KiB bounds that 40 times tighter while refusing nothing a browser accepts. For HTTP/2 the
	// same figure (plus net/http's small per-field allowance) is advertised as
	// SETTINGS_MAX_HEADER_LIST_SIZE.
	//
	// A response over the limit fails the attempt with net/http's error ("server response headers
	// exceeded 262144 bytes" for HTTP/1, "response header list larger than advertised limit" for
	// HTTP/2), which DefaultClassifier judges neutral and origin-scoped: the origin sent it, through
	// every exit alike, so no exit is blamed and a retry through another exit would get the same.
	DefaultMaxResponseHeaderBytes = 256 << 10
	// DefaultBodyStallTimeout is how long a body may deliver nothing while the caller waits for it:
	// the header timeout's default, so that an exit that falls silent is blamed as soon after its
	// headers as before them, and before a 30 s http.Client.Timeout ends the request blaming nobody.
	DefaultBodyStallTimeout = 15 * time.Second
	// DefaultMinBodyRate is the slowest a body may arrive, in bytes per second of the caller's
	// waiting. At 4 KiB/s a megabyte takes over four minutes: no exit worth keeping is that slow.
	DefaultMinBodyRate = 4 << 10
	// DefaultBodyRateWindow is the span of waiting the rate is averaged over.
	DefaultBodyRateWindow = 10 * time.Second
	// DefaultBodyRateGrace is how long the caller may wait at the start of a body before its rate
	// is judged: an origin that takes a moment to start streaming is not slow.
	DefaultBodyRateGrace = 5 * time.Second
)

// Option configures a Transport. Options are built by the With functions. As in package pool, a
// zero value keeps the default, and a value that cannot be right (a nil func) is an error from New
// naming the option.
type Option interface{ apply(*config) error }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	classifier    Classifier
	observers     []Observer
	base          http.RoundTripper
	template      *http.Transport
	originKey     OriginFunc
	headerTimeout time.Duration
	bodyPace      bodyPace
	resolver      *net.Resolver
	middleware    []Middleware
	exitMW        []ExitMiddleware
	pages         PageLooks // pagelook.go
}

func newConfig(opts []Option) (*config, error) {
	c := &config{
		classifier:    DefaultClassifier,
		originKey:     OriginHost,
		headerTimeout: DefaultHeaderTimeout,
		bodyPace:      defaultBodyPace,
		resolver:      net.DefaultResolver,
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(c); err != nil {
			return nil, err
		}
	}
	if c.template == nil {
		c.template = DefaultBaseTemplate()
	}
	return c, nil
}

// WithClassifier sets the classifier. Default DefaultClassifier.
func WithClassifier(cl Classifier) Option {
	return optionFunc(func(c *config) error {
		if cl == nil {
			return fmt.Errorf("transport: WithClassifier: nil classifier")
		}
		c.classifier = cl
		return nil
	})
}

// WithObserver adds observers of the transport's attempts. Each receives every event, in the order
// added. One that also implements pool.Observer is added to the pool's observers by New (through
// pool.Pool.Observe, which also binds one that reads the pool, such as otelbreaker's gauges) and
// removed by Close: one call plugs it in whole.
func WithObserver(obs ...Observer) Option {
	return optionFunc(func(c *config) error {
		for _, o := range obs {
			if o == nil {
				return fmt.Errorf("transport: WithObserver: nil observer")
			}
			c.observers = append(c.observers, o)
		}
		return nil
	})
}

// WithBase replaces the per-exit base transports with rt, which must send each request through
// ExitFromContext(req.Context()), and never directly unless that exit is a direct one
// (pool.Exit.Direct, whose ProxyURL is nil).
func WithBase(rt http.RoundTripper) Option {
	return optionFunc(func(c *config) error {
		if rt == nil {
			return fmt.Errorf("transport: WithBase: nil RoundTripper")
		}
		c.base = rt
		return nil
	})
}

// WithBaseTemplate sets the *http.Transport each exit's base transport is cloned from: TLS
// settings, timeouts, connection limits. Its Proxy, OnProxyConnectResponse and (for SOCKS exits)
// DialContext are replaced. Default: DefaultBaseTemplate().
func WithBaseTemplate(t *http.Transport) Option {
	return optionFunc(func(c *config) error {
		if t == nil {
			return fmt.Errorf("transport: WithBaseTemplate: nil template")
		}
		c.template = t
		return nil
	})
}

// WithResolver sets the resolver socks5:// exits look origin names up with (socks5h:// exits leave
// that to the proxy; HTTP proxies resolve names themselves). Default net.DefaultResolver.
func WithResolver(r *net.Resolver) Option {
	return optionFunc(func(c *config) error {
		if r == nil {
			return fmt.Errorf("transport: WithResolver: nil resolver")
		}
		c.resolver = r
		return nil
	})
}

// WithOriginKey sets how a request URL maps to an origin. Default OriginHost; OriginSite groups
// by registrable domain.
func WithOriginKey(f OriginFunc) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return fmt.Errorf("transport: WithOriginKey: nil func")
		}
		c.originKey = f
		return nil
	})
}

// WithHeaderTimeout bounds each attempt from the moment it leaves until its response headers (and
// the peek at a suspicious body) arrive, on the pool's clock. It is what lets the transport blame a
// hanging exit: a timeout of the caller's own context is neutral. Keep it below
// http.Client.Timeout. Default 15 s; negative disables it.
func WithHeaderTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d == 0 {
			d = DefaultHeaderTimeout
		}
		c.headerTimeout = d
		return nil
	})
}

// WithMiddleware adds per-request middleware: it wraps the whole transport — pick, attempt,
// classification — and sees each request once, as the caller sent it. The first given is the
// outermost. Like any RoundTripper it must not modify the request it is given (clone it).
func WithMiddleware(m ...Middleware) Option {
	return optionFunc(func(c *config) error {
		for i, f := range m {
			if f == nil {
				return fmt.Errorf("transport: WithMiddleware: middleware %d is nil", i)
			}
		}
		c.middleware = append(c.middleware, m...)
		return nil
	})
}

// WithExitMiddleware adds per-attempt middleware: it wraps each exit's base transport, built once
// per exit (so it may hold per-exit state: a signer, a header set), and sees every attempt through
// that exit after the pick and before classification. The first given is the outermost.
func WithExitMiddleware(m ...ExitMiddleware) Option {
	return optionFunc(func(c *config) error {
		for i, f := range m {
			if f == nil {
				return fmt.Errorf("transport: WithExitMiddleware: middleware %d is nil", i)
			}
		}
		c.exitMW = append(c.exitMW, m...)
		return nil
	})
}

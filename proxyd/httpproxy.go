package proxyd

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// ServeHTTP serves one HTTP request on a listener: a CONNECT opens a tunnel, an absolute-URI
// request is sent on through the transport, anything else is answered 400 (this is a proxy).
func (l *listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := l.s
	opts, ref := l.requestOptions(r)
	if ref != nil {
		if r.Method == http.MethodConnect {
			w.Header().Set("Connection", "close")
		}
		writeRefusal(w, ref)
		return
	}
	if r.Method == http.MethodConnect {
		l.serveConnect(w, r, opts)
		return
	}
	if !r.URL.IsAbs() || r.URL.Host == "" || (r.URL.Scheme != "http" && r.URL.Scheme != "https") {
		s.metrics.optionsRefused.Add(1)
		writeRefusal(w, &refusal{status: http.StatusBadRequest, errType: "http_request_error",
			reason: "this is a proxy: send absolute-URI requests (GET http://host/path) or CONNECT host:port"})
		return
	}
	ctx := r.Context()
	if !s.cfg.AllowPrivate {
		if err := checkHost(r.URL.Hostname()); err != nil {
			s.metrics.targetsRefused.Add(1)
			writeRefusal(w, forbiddenRefusal(err))
			return
		}
		ctx = context.WithValue(ctx, targetHostKey{}, strings.Trim(r.URL.Hostname(), "[]"))
	}
	if opts.Session != "" {
		ctx = transport.ContextWithSession(ctx, opts.Session) // its exit is noted once known (ModifyResponse)
	}
	if opts.Exit != "" {
		ctx = transport.ContextWithExit(ctx, opts.Exit)
	}
	if opts.Want != nil {
		ctx = transport.ContextWithWant(ctx, opts.Want)
	}
	ctx = context.WithValue(ctx, sessionKey{}, opts.Session)
	s.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// sessionKey carries a plain-HTTP request's session option to ModifyResponse.
type sessionKey struct{}

// requestOptions checks the request's credentials and reads its options: the listener's profile,
// the proxy username's, and the options header's.
func (l *listener) requestOptions(r *http.Request) (Options, *refusal) {
	s := l.s
	var text string
	user, pass, hasAuth := parseBasic(r.Header.Get("Proxy-Authorization"))
	if !s.creds.empty() {
		account, rest := SplitUsername(user)
		if !hasAuth || !s.creds.check(account, pass) {
			s.metrics.authRefused.Add(1)
			return Options{}, &refusal{status: http.StatusProxyAuthRequired, errType: "http_request_denied",
				reason: "proxy credentials required (Proxy-Authorization: Basic)"}
		}
		text = rest
	} else if hasAuth {
		_, text = SplitUsername(user)
	}
	opts, err := ParseOptions(text)
	if err == nil {
		var hopts Options
		if hopts, err = ParseOptions(r.Header.Get(OptionsHeader)); err == nil {
			if opts, err = opts.Merge(hopts); err == nil {
				opts, err = l.profile.Merge(opts)
			}
		}
	}
	if err != nil {
		s.metrics.optionsRefused.Add(1)
		return Options{}, &refusal{status: http.StatusBadRequest, errType: "http_request_error", reason: err.Error(), socks: socksNotAllowed}
	}
	return opts, nil
}

// serveConnect opens a tunnel for a CONNECT and relays it on the hijacked connection.
func (l *listener) serveConnect(w http.ResponseWriter, r *http.Request, opts Options) {
	s := l.s
	host, port, err := net.SplitHostPort(r.RequestURI)
	if err != nil || host == "" || !validPort(port) {
		w.Header().Set("Connection", "close")
		writeRefusal(w, &refusal{status: http.StatusBadRequest, errType: "http_request_error", reason: "CONNECT wants host:port"})
		return
	}
	if strings.ContainsAny(host, " /@") {
		w.Header().Set("Connection", "close")
		writeRefusal(w, &refusal{status: http.StatusBadRequest, errType: "http_request_error", reason: "CONNECT target: not a host name or address"})
		return
	}
	target := net.JoinHostPort(host, port)
	tn, ref := s.openTunnel(host, target, opts)
	if ref != nil {
		if ref.status == http.StatusForbidden {
			s.metrics.targetsRefused.Add(1)
		}
		w.Header().Set("Connection", "close")
		writeRefusal(w, ref)
		return
	}
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		tn.abandon()
		return
	}
	if err := connectReply(c, tn.proxyStatus(receivedOf(tn))); err != nil {
		c.Close()
		tn.abandon()
		return
	}
	tn.run(c, brw.Reader)
}

// receivedOf is the status a tunnel's exit answered its CONNECT with: 200 for an HTTP proxy, none
// for SOCKS5 and direct exits.
func receivedOf(t *tunnel) int {
	switch t.exit.Scheme() {
	case pool.SchemeHTTP, pool.SchemeHTTPS:
		return http.StatusOK
	}
	return 0
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n > 0 && n < 65536 && p[0] != '+'
}

// reverseProxy is the plain-HTTP path: the request, its hop-by-hop headers and the options header
// removed, goes through the transport; the response comes back with the daemon's Proxy-Status.
// Nothing is added: no Via, no X-Forwarded-For (the origin would learn it passed a proxy).
func (s *Server) reverseProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.Header.Del(OptionsHeader)
			pr.Out.RequestURI = ""
		},
		Transport: s.tr,
		ModifyResponse: func(resp *http.Response) error {
			ps := proxyStatus{received: resp.StatusCode}
			if e := transport.ExitFromResponse(resp); e != nil {
				ps.exit = e.Label()
				if sess, _ := resp.Request.Context().Value(sessionKey{}).(string); sess != "" {
					s.sessions.note(sess, s.cfg.OriginKey(resp.Request.URL), e.Label())
				}
			}
			if v, ok := transport.VerdictFromResponse(resp); ok {
				ps.details = verdictDetails(v)
			}
			ps.add(resp.Header)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeRefusal(w, s.attemptRefusal(r, err))
		},
		ErrorLog: nil,
	}
}

// attemptRefusal turns what the transport returned instead of a response into the daemon's answer.
func (s *Server) attemptRefusal(r *http.Request, err error) *refusal {
	var ae *transport.AttemptError
	switch {
	case errors.Is(err, ErrForbiddenTarget):
		s.metrics.targetsRefused.Add(1)
		return forbiddenRefusal(err)
	case errors.As(err, &ae):
		v := ae.Verdict
		return &refusal{status: failureStatus(v.Class), errType: errorType(v.Class), exit: ae.Exit,
			reason: "via " + ae.Exit + ": " + verdictDetails(v)}
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		return &refusal{status: http.StatusBadGateway, errType: "proxy_internal_error", reason: "the client went away"}
	}
	var nh *pool.NoHealthyExitError
	var ou *pool.OriginUnhealthyError
	var th *pool.ThrottledError
	var nm *pool.NoMatchingExitError
	var bs *pool.BudgetSpentError
	if errors.As(err, &nh) || errors.As(err, &ou) || errors.As(err, &th) || errors.As(err, &nm) || errors.As(err, &bs) {
		return pickRefusal(err)
	}
	return &refusal{status: http.StatusBadGateway, errType: "proxy_internal_error", reason: "proxyd: " + err.Error()}
}

// originOfSite returns the origin key of site: a URL, a host or host:port.
func originOfSite(key transport.OriginFunc, site string) string {
	if u, err := url.Parse(site); err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https") {
		return key(u)
	}
	return key(&url.URL{Scheme: schemeForPort(site), Host: site})
}

package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// Verdict is the verdict ours reports for an attempt whose result was r, arriving at now: the
// one transport.DefaultClassifier gives the response or error a real exit's base transport would
// have handed the Transport (onTheWire builds it), read as the Transport reads it — a response the
// classifier calls a success gets its verdict when its body ends, so Verdict reads the body, and a
// body that dies mid-read is a body_read failure (transport/attempt.go). Nothing is decided here:
// whatever rules the classifier gains judge the simulation's answers too, and
// TestVerdictMatchesTransport checks every answer against a real transport.Transport.
//
//	answer                 as the network gives it
//	OK                     200 text/html, a 12 KB page
//	SoftBlock (a ban)      200 text/html, a 2 KB "Verify you are human" page, no marker (softblock.go)
//	Challenge (a ban)      403, Cloudflare's challenge page: Server: cloudflare, cf-mitigated: challenge
//	Banned403 (a ban)      403, nginx's plain "403 Forbidden" page, nothing else to tell it by
//	Site403                the same 403, for the path the origin forbids to everyone
//	RateLimited            429, with Retry-After in whole seconds when the origin sends one
//	ProxyAuth              407 from the proxy (https: its answer to the CONNECT)
//	ProxyDenied            squid's 403 with X-Squid-Error: ERR_ACCESS_DENIED 0 (https: to the CONNECT)
//	Timeout                no response headers in time: a read deadline
//	Refused                the dial to the proxy refused (net/http's proxyconnect error)
//	SlowBody               200 application/octet-stream, 8 MiB announced; the body delivers a few
//	                       bytes, then the body pace rule cuts it (a read error)
//	Unavailable            503, nginx's "503 Service Temporarily Unavailable" page, no Retry-After
//
// Verdict panics on an answer it does not know, so that a new answer cannot go unjudged.
func Verdict(r Result, now time.Time) pool.Verdict {
	req := wireRequest(r)
	resp, err := onTheWire(r, req)
	a := &transport.Attempt{Request: req, Response: resp, Err: err, Exit: wireExit, Origin: req.URL.Host, Now: now}
	v := transport.DefaultClassifier.Classify(a)
	if err != nil || v.Outcome != pool.Success {
		return v
	}
	// The caller reads the body (the classifier may have replaced it to peek: read what it left).
	if _, err := io.Copy(io.Discard, a.Response.Body); err != nil {
		return bodyDied
	}
	return v
}

// bodyDied is the Transport's verdict for a successful response whose body fails mid-read, the
// body pace rule's cut included (transport/attempt.go).
var bodyDied = pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBodyRead, ConnLevel: true}

// wireExit is the exit every attempt Verdict builds goes through: the classifier judges an answer,
// not an exit's history.
var wireExit = pool.MustParseExit("http://127.0.0.1:20000")

// errBodyCut is what a slow body's Read returns: the body pace rule ended it.
var errBodyCut = errors.New("sim: response body cut by the body pace rule")

// slowBodySize is what a slow body announces.
const slowBodySize = 8 << 20

// wireRequest is the request of an attempt whose result was r: a GET of origin 0's page, or of
// the path it forbids for a Site403, over https when r went through a tunnel.
func wireRequest(r Result) *http.Request {
	u := "http://"
	if r.HTTPS {
		u = "https://"
	}
	u += OriginKey(0) + Request{Forbidden: r.Answer == Site403}.Path()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
	if err != nil {
		panic(err)
	}
	return req
}

// pageBody is the page: a 12 KB product page (six times the size of a SoftBlock's page).
var pageBody = "<!doctype html><html><head><title>Item</title></head><body><h1>Item</h1><p>In stock.</p><ul>" +
	strings.Repeat("<li class=\"spec\">A line of the item's specification.</li>\n", 240) + "</ul></body></html>"

// The bodies of the other answers.
const (
	challengeBody = "<!DOCTYPE html><html lang=\"en-US\"><head><title>Just a moment...</title></head><body>" +
		"<noscript>Enable JavaScript and cookies to continue</noscript></body></html>"
	nginx403Body = "<html>\r\n<head><title>403 Forbidden</title></head>\r\n<body>\r\n" +
		"<center><h1>403 Forbidden</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
	nginx503Body = "<html>\r\n<head><title>503 Service Temporarily Unavailable</title></head>\r\n<body>\r\n" +
		"<center><h1>503 Service Temporarily Unavailable</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
	squidDeniedBody = "<!DOCTYPE html><html><head><title>ERROR: The requested URL could not be retrieved</title></head>" +
		"<body><div id=\"content\"><p>Access control configuration prevents your request from being allowed at this time.</p>" +
		"</div><hr><div id=\"footer\"><p>Generated by proxy (squid/5.7)</p></div></body></html>"
)

// squidDeniedHeader is the header of squid 5.7's answer to a request its http_access rules deny.
func squidDeniedHeader() http.Header {
	return http.Header{
		"Server":           {"squid/5.7"},
		"Mime-Version":     {"1.0"},
		"Content-Type":     {"text/html;charset=utf-8"},
		"Content-Length":   {strconv.Itoa(len(squidDeniedBody))},
		"X-Squid-Error":    {"ERR_ACCESS_DENIED 0"},
		"Vary":             {"Accept-Language"},
		"Content-Language": {"en"},
		"X-Cache":          {"MISS from proxy"},
		"Via":              {"1.1 proxy (squid/5.7)"},
		"Connection":       {"keep-alive"},
	}
}

// onTheWire returns what a real exit's base transport returns for an attempt of req whose result
// was r: the response, or the error net/http gives.
func onTheWire(r Result, req *http.Request) (*http.Response, error) {
	header := http.Header{}
	code, body := http.StatusOK, pageBody
	var rd io.Reader
	switch r.Answer {
	case OK:
		header.Set("Content-Type", "text/html; charset=utf-8")
	case Challenge:
		code, body = http.StatusForbidden, challengeBody
		header.Set("Server", "cloudflare")
		header.Set("Cf-Mitigated", "challenge")
		header.Set("Cf-Ray", "8f1e2d3c4b5a6978-FRA")
		header.Set("Content-Type", "text/html; charset=UTF-8")
	case Banned403, Site403:
		code, body = http.StatusForbidden, nginx403Body
		header.Set("Server", "nginx")
		header.Set("Content-Type", "text/html")
	case Unavailable:
		code, body = http.StatusServiceUnavailable, nginx503Body
		header.Set("Server", "nginx")
		header.Set("Content-Type", "text/html")
	case RateLimited:
		code, body = http.StatusTooManyRequests, "slow down"
		if r.RetryAfter > 0 {
			header.Set("Retry-After", strconv.Itoa(int(r.RetryAfter/time.Second)))
		}
	case ProxyAuth:
		code, body = http.StatusProxyAuthRequired, "proxy auth required"
		header.Set("Proxy-Authenticate", `Basic realm="proxy"`)
		if r.HTTPS {
			return nil, &transport.ProxyConnectError{Exit: "x000", StatusCode: code, Status: "407 Proxy Authentication Required", Header: header}
		}
	case ProxyDenied:
		code, body, header = http.StatusForbidden, squidDeniedBody, squidDeniedHeader()
		if r.HTTPS {
			return nil, &transport.ProxyConnectError{Exit: "x000", StatusCode: code, Status: "403 Forbidden", Header: header}
		}
	case Timeout:
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	case Refused:
		dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		return nil, &net.OpError{Op: "proxyconnect", Net: "tcp", Err: dial}
	case SoftBlock:
		return softBlockWire(req), nil
	case SlowBody:
		header.Set("Content-Type", "application/octet-stream")
		header.Set("Content-Length", strconv.Itoa(slowBodySize))
		rd = io.MultiReader(strings.NewReader(strings.Repeat("\x00", 2048)), errReader{errBodyCut})
	default:
		panic(fmt.Sprintf("sim: no wire form for %+v", r))
	}
	size := int64(len(body))
	if rd == nil {
		rd = strings.NewReader(body)
	} else {
		size = slowBodySize
	}
	return &http.Response{
		StatusCode: code, Status: strconv.Itoa(code) + " " + http.StatusText(code),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: header, Request: req,
		Body: io.NopCloser(rd), ContentLength: size,
	}, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// Judgement is how ours judges one form of an answer of the ground truth: the verdict Verdict
// gives it with the classifier of the build.
type Judgement struct {
	Result  Result // latency aside
	Verdict pool.Verdict
}

// Judgements returns the judgement of every form of every answer the ground truth gives: a 429
// with and without Retry-After, the proxy's own answers on a request and to a CONNECT.
func Judgements() []Judgement {
	var js []Judgement
	add := func(r Result) { js = append(js, Judgement{Result: r, Verdict: Verdict(r, Epoch)}) }
	for a := range numAnswers {
		switch a {
		case RateLimited:
			add(Result{Answer: a, RetryAfter: 30 * time.Second})
			add(Result{Answer: a})
		case ProxyAuth, ProxyDenied:
			add(Result{Answer: a})
			add(Result{Answer: a, HTTPS: true})
		default:
			add(Result{Answer: a})
		}
	}
	return js
}

// Wire describes how j's answer comes on the wire.
func (j Judgement) Wire() string {
	r := j.Result
	switch r.Answer {
	case OK:
		return "200 text/html, a 12 KB page"
	case Challenge:
		return "403, Cloudflare's challenge page (`cf-mitigated: challenge`)"
	case Banned403, Site403:
		return "403, nginx's plain 403 Forbidden page"
	case RateLimited:
		if r.RetryAfter > 0 {
			return "429 with `Retry-After: " + strconv.Itoa(int(r.RetryAfter/time.Second)) + "`"
		}
		return "429 without Retry-After"
	case ProxyAuth:
		if r.HTTPS {
			return "the proxy's 407 to the CONNECT"
		}
		return "the proxy's 407"
	case ProxyDenied:
		if r.HTTPS {
			return "squid's 403 to the CONNECT, `X-Squid-Error: ERR_ACCESS_DENIED 0`"
		}
		return "squid's 403 page, `X-Squid-Error: ERR_ACCESS_DENIED 0`"
	case Timeout:
		return "no response headers in time (a read deadline)"
	case Refused:
		return "the dial to the proxy refused"
	case SlowBody:
		return "200 application/octet-stream, 8 MiB announced; the body pace rule cuts it after 2 KiB"
	case Unavailable:
		return "503, nginx's 503 Service Temporarily Unavailable page (an outage), no Retry-After"
	case SoftBlock:
		return "200 text/html, a 2 KB \"Verify you are human\" page, no vendor marker"
	}
	return "?"
}

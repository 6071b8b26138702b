package transport

import (
	"bytes"
	"io"
	"net/http"
	"strings"
)

// smallPage is the largest declared Content-Length of a 200 HTML response the default classifier
// peeks at without a WAF header hint: interstitials are small, real pages rarely are.
const smallPage = 32 << 10

// maxChallengeLinks is the most links a 200 page may hold and still pass for a captcha interstitial
// rather than a page that embeds a captcha: a gate page links to little (a privacy notice, a help
// page), a real page has navigation.
const maxChallengeLinks = 3

// Sample is what a Detector looks at: the response (headers and status) and, for suspicious
// responses, the first bytes of its body.
type Sample struct {
	Response *http.Response
	Body     []byte // up to the peek limit, as received; nil if the body was not peeked
	Lower    []byte // Body with ASCII letters lower-cased, for case-insensitive matching
	Complete bool   // Body is the whole body
}

// Contains reports whether the lower-cased body contains s, which must be lower case. A marker of
// up to 32 bytes costs no allocation (the compiler converts it on the stack); the built-in
// detectors keep theirs that short.
func (s *Sample) Contains(sub string) bool { return bytes.Contains(s.Lower, []byte(sub)) }

// Header returns the named response header, lower-cased.
func (s *Sample) Header(name string) string { return strings.ToLower(s.Response.Header.Get(name)) }

// Detector recognises one family of soft blocks (WAF challenge or block pages).
// Detectors must be safe for concurrent use and must not read the response body.
type Detector interface {
	Name() string
	Detect(s *Sample) bool
}

type detectorFunc struct {
	name string
	fn   func(*Sample) bool
}

func (d detectorFunc) Name() string          { return d.name }
func (d detectorFunc) Detect(s *Sample) bool { return d.fn(s) }

// NewDetector returns a Detector named name that matches when fn returns true.
func NewDetector(name string, fn func(*Sample) bool) Detector { return detectorFunc{name, fn} }

// Vendor edges, recognised by the headers their edge servers add. None is a challenge by itself:
// each is on every response the vendor serves. They make a marker that is weak alone (a page title)
// count, and they make suspicious peek at 200 pages of any length.

// suspicious reports whether a response may be a soft block worth peeking at. It runs on every
// response, so it reads only the status and a few headers, and a 200 that is not HTML costs one
// header lookup, as before there were vendor hints.
//
//   - 403, 428, 429 and 503: always (block pages, Akamai's and Kasada's challenges, rate limits).
//   - 202 and 405: with AWS WAF's x-amzn-waf-action header, or HTML (its Challenge and CAPTCHA).
//   - 200 HTML: when small (a declared length up to 32 KiB), or, at any length, with a header that
//     says a WAF vendor's edge served it (cf-mitigated, X-DataDome, Cloudflare's Server or CF-Ray,
//     Imperva's X-Iinfo or X-CDN, Server: AkamaiGHost, AWS WAF's action header, or Akamai Bot
//     Manager's challenge cookie sec_cpt being set): compressed and chunked pages arrive with no
//     length, and challenges are served that way too. Other 200 pages are never peeked at.
func suspicious(resp *http.Response) bool {
	h := resp.Header
	switch resp.StatusCode {
	case http.StatusForbidden, http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusPreconditionRequired:
		return true
	case http.StatusAccepted, http.StatusMethodNotAllowed:
		return headerValue(h, "X-Amzn-Waf-Action") != "" || strings.Contains(headerValue(h, "Content-Type"), "html")
	case http.StatusOK:
	default:
		return false
	}
	if !strings.Contains(headerValue(h, "Content-Type"), "html") {
		return false
	}
	if resp.ContentLength >= 0 && resp.ContentLength <= smallPage {
		return true
	}
	return headerValue(h, "Cf-Mitigated") != "" || headerValue(h, "X-Datadome") != "" || headerValue(h, "X-Amzn-Waf-Action") != "" ||
		cloudflareEdge(h) || impervaEdge(h) || akamaiEdge(h) || setsCookie(h, "sec_cpt=")
}

// setsCookie reports whether a Set-Cookie header of h sets the cookie prefix names ("name=").
func setsCookie(h http.Header, prefix string) bool {
	for _, c := range h["Set-Cookie"] {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

// peekBody reads up to limit bytes of resp's body and puts them back in front of the rest, so the
// caller still reads the whole body, byte for byte, and any read error at the same point.
func peekBody(resp *http.Response, limit int) (prefix []byte, complete bool, err error) {
	if resp.Body == nil || resp.Body == http.NoBody || limit <= 0 {
		return nil, resp.Body == http.NoBody, nil
	}
	size := limit
	if resp.ContentLength >= 0 && resp.ContentLength < int64(limit) {
		size = int(resp.ContentLength) + 1 // +1 to see the EOF in one read
	}
	// Not io.ReadFull: it turns an early EOF into io.ErrUnexpectedEOF, which is also what net/http
	// returns for a truncated body, and a truncated body must not pass for a complete one.
	buf := make([]byte, size)
	n := 0
	var rerr error
	for n < size && rerr == nil {
		var m int
		m, rerr = resp.Body.Read(buf[n:])
		n += m
	}
	buf = buf[:n]
	rb := &replayBody{prefix: buf, rest: resp.Body}
	switch {
	case rerr == io.EOF:
		complete, rb.restErr = true, io.EOF
	case rerr != nil:
		rb.restErr, err = rerr, rerr
	case resp.ContentLength >= 0 && int64(n) >= resp.ContentLength:
		complete = true // a body exactly limit long: the rest reads io.EOF
	}
	resp.Body = rb
	return buf, complete, err
}

// replayBody serves a peeked prefix, then the rest of the original body (or the error that ended
// the peek).
type replayBody struct {
	prefix  []byte
	rest    io.ReadCloser
	restErr error
}

func (r *replayBody) Read(p []byte) (int, error) {
	if len(r.prefix) > 0 {
		n := copy(p, r.prefix)
		r.prefix = r.prefix[n:]
		return n, nil
	}
	if r.restErr != nil {
		return 0, r.restErr
	}
	return r.rest.Read(p)
}

func (r *replayBody) Close() error { return r.rest.Close() }

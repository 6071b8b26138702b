package transport

import (
	"bytes"
	"io"
	"net/http"
	"strings"
)

// DefaultPeekLimit is how much of a suspicious body the default classifier reads to look for a
// challenge page: challenge pages announce themselves in their first few KiB.
const DefaultPeekLimit = 4 << 10

// smallPage is the largest declared Content-Length of a 200 HTML response the default classifier
// peeks at without a WAF header hint: interstitials are small, real pages rarely are.
const smallPage = 32 << 10

// Sample is what a Detector looks at: the response (headers and status) and, for suspicious
// responses, the first bytes of its body.
type Sample struct {
	Response *http.Response
	Body     []byte // up to the peek limit, as received; nil if the body was not peeked
	Lower    []byte // Body with ASCII letters lower-cased, for case-insensitive matching
	Complete bool   // Body is the whole body
}

// Contains reports whether the lower-cased body contains s, which must be lower case.
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

func containsAny(s *Sample, subs ...string) bool {
	for _, sub := range subs {
		if s.Contains(sub) {
			return true
		}
	}
	return false
}

// The built-in detectors.
var (
	// Cloudflare matches the cf-mitigated: challenge header and Cloudflare's challenge and block pages.
	Cloudflare = NewDetector("cloudflare", func(s *Sample) bool {
		if s.Header("Cf-Mitigated") == "challenge" {
			return true
		}
		if containsAny(s, "/cdn-cgi/challenge-platform/", "cf_chl_opt", "cf-browser-verification") {
			return true
		}
		cf := strings.Contains(s.Header("Server"), "cloudflare") || s.Response.Header.Get("Cf-Ray") != ""
		return cf && s.Response.StatusCode != http.StatusOK &&
			containsAny(s, "<title>just a moment...</title>", "attention required! | cloudflare", "cf-error-details")
	})
	// DataDome matches DataDome's captcha and block pages.
	DataDome = NewDetector("datadome", func(s *Sample) bool {
		if containsAny(s, "captcha-delivery.com") {
			return true
		}
		return s.Response.StatusCode == http.StatusForbidden && s.Response.Header.Get("X-Datadome") != ""
	})
	// PerimeterX matches PerimeterX (HUMAN) block pages.
	PerimeterX = NewDetector("perimeterx", func(s *Sample) bool {
		return containsAny(s, "px-captcha", "_pxappid", "px-cdn.net", "perimeterx")
	})
	// Akamai matches Akamai's "Access Denied … Reference #" block page.
	Akamai = NewDetector("akamai", func(s *Sample) bool {
		if s.Response.StatusCode != http.StatusForbidden {
			return false
		}
		return s.Contains("access denied") && containsAny(s, "reference #", "reference&#32;&#35;")
	})
	// Captcha matches pages built around reCAPTCHA, hCaptcha or Turnstile: on an error status always,
	// on a 200 only when the whole (small) page was read, so a login form with a captcha is not a block.
	Captcha = NewDetector("captcha", func(s *Sample) bool {
		if s.Response.StatusCode == http.StatusOK && !s.Complete {
			return false
		}
		return containsAny(s, "g-recaptcha", "google.com/recaptcha", "hcaptcha.com", "h-captcha",
			"challenges.cloudflare.com/turnstile", "cf-turnstile")
	})
)

// DefaultDetectors are the detectors DefaultClassifier uses.
var DefaultDetectors = []Detector{Cloudflare, DataDome, PerimeterX, Akamai, Captcha}

// suspicious reports whether a response may be a soft block worth peeking at.
func suspicious(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusForbidden, http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return true
	case http.StatusOK:
	default:
		return false
	}
	if !strings.Contains(resp.Header.Get("Content-Type"), "html") {
		return false
	}
	h := resp.Header
	if h.Get("Cf-Mitigated") != "" || h.Get("X-Datadome") != "" {
		return true
	}
	return resp.ContentLength >= 0 && resp.ContentLength <= smallPage
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

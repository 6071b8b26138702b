package transport

import (
	"bytes"
	"net/http"
	"strings"
)

// The built-in detectors. Each comment says which markers the detector uses and where they are
// described. A marker that also appears on ordinary pages of the vendor's customers never counts
// alone on a 200: a false "blocked" opens the pair of an exit that was served.
var (
	// Cloudflare matches Cloudflare's challenge and block pages.
	//
	// Markers: the cf-mitigated: challenge header, set on every Challenge Page whatever its type,
	// "challenge" being its only value (Cloudflare docs, "Detect a Challenge Page response"); the
	// challenge page's own script, window._cf_chl_opt and the orchestrate script under
	// /cdn-cgi/challenge-platform/, and the older "I'm Under Attack" page's cf-browser-verification
	// block; with a Cloudflare edge header (Server: cloudflare or CF-Ray), the challenge page's title
	// "Just a moment..." and the block page's "Attention Required! | Cloudflare" at any status — a
	// challenge served 200 without cf-mitigated passed for success and silently ended a crawl — and
	// the error page's cf-error-details block on an error status ("Cloudflare errors", e.g. 1020
	// Access denied). A bare /cdn-cgi/challenge-platform/ path is not a marker: Cloudflare's
	// JavaScript detections inject /cdn-cgi/challenge-platform/scripts/jsd/main.js into ordinary
	// pages (Cloudflare docs, "JavaScript detections").
	Cloudflare = NewDetector("cloudflare", func(s *Sample) bool {
		if s.Header("Cf-Mitigated") == "challenge" {
			return true
		}
		if containsAny(s, "cf_chl_opt", "cf-browser-verification") {
			return true
		}
		if s.Contains("/cdn-cgi/challenge-platform/") && s.Contains("/orchestrate") {
			return true
		}
		if !cloudflareEdge(s.Response.Header) {
			return false
		}
		if containsAny(s, "<title>just a moment...</title>", "attention required! | cloudflare") {
			return true
		}
		return s.Response.StatusCode != http.StatusOK && s.Contains("cf-error-details")
	})
	// DataDome matches DataDome's captcha and block pages: their captcha-delivery.com scripts, and
	// the X-DataDome header on a 403.
	DataDome = NewDetector("datadome", func(s *Sample) bool {
		if containsAny(s, "captcha-delivery.com") {
			return true
		}
		return s.Response.StatusCode == http.StatusForbidden && s.Response.Header.Get("X-Datadome") != ""
	})
	// PerimeterX matches PerimeterX (HUMAN) block pages. The block page's px-captcha element counts
	// at any status; its sensor markers (the _pxAppId setting, the px-cdn.net client script, the
	// vendor's name) only on an error status, since every protected page loads the same sensor.
	PerimeterX = NewDetector("perimeterx", func(s *Sample) bool {
		if s.Contains("px-captcha") {
			return true
		}
		return s.Response.StatusCode != http.StatusOK && containsAny(s, "_pxappid", "px-cdn.net", "perimeterx")
	})
	// Akamai matches Akamai's deny page and Bot Manager's challenge interstitials.
	//
	// Markers: the edge's "Access Denied … Reference #18.…" page (Akamai Community, "Why is Akamai
	// blocking me?"), on a 403 by its text, and at any other status (a deny action answered 200)
	// only with the edge's own mark, Server: AkamaiGHost or the page's errors.edgesuite.net link;
	// Bot Manager's crypto and behavioral challenges ("sec-cpt"): the sec-if-cpt-container element,
	// the /_sec/cp_challenge/ assets and "Powered and protected by Akamai" on an error status or a
	// small 200 page read whole, and the 428 JSON answer's "sec-cp-challenge" field; the challenge
	// sets the sec_cpt cookie, which only makes the classifier peek. Bot Manager's other cookies
	// (_abck, bm_sz, ak_bmsc) are set on ordinary pages and are not markers.
	Akamai = NewDetector("akamai", func(s *Sample) bool {
		code := s.Response.StatusCode
		if s.Contains("access denied") && containsAny(s, "reference #", "reference&#32;&#35;") &&
			(code == http.StatusForbidden || akamaiEdge(s.Response.Header) ||
				containsAny(s, "errors.edgesuite.net", "errors&#46;edgesuite&#46;net")) {
			return true
		}
		if code == http.StatusPreconditionRequired && s.Contains("sec-cp-challenge") {
			return true
		}
		if code == http.StatusOK && !s.Complete {
			return false
		}
		return containsAny(s, "sec-if-cpt-container", "/_sec/cp_challenge/", "powered and protected by akamai")
	})
	// Imperva matches Imperva (Incapsula) Cloud WAF block and challenge pages.
	//
	// Markers: the incident page, "Request unsuccessful. Incapsula incident ID: …", whether served
	// as the page or inside the challenge iframe, whose /_Incapsula_Resource URL carries the
	// incident_id; the newer block page's "This request was blocked by our security service" (Imperva
	// error codes, e.g. error 15) with an Imperva edge header or mention; and the title of Imperva
	// Advanced Bot Protection's (formerly Distil's) block page, "Pardon Our Interruption". An
	// Imperva-fronted ordinary page also carries X-Iinfo, the incap_ses_/visid_incap_ cookies and an
	// injected /_Incapsula_Resource script: none of them is a marker.
	Imperva = NewDetector("imperva", func(s *Sample) bool {
		if containsAny(s, "incapsula incident id", "pardon our interruption</title>") {
			return true
		}
		if s.Contains("/_incapsula_resource?") && s.Contains("incident_id=") {
			return true
		}
		return s.Contains("blocked by our security service") &&
			(impervaEdge(s.Response.Header) || containsAny(s, "imperva", "incapsula"))
	})
	// AWSWAF matches AWS WAF's Challenge and CAPTCHA actions.
	//
	// Markers: the x-amzn-waf-action header, "challenge" (with status 202) or "captcha" (with status
	// 405), which AWS WAF sets on every response of those actions, whatever the request accepts
	// (AWS WAF Developer Guide, "CAPTCHA and Challenge action behavior"); without it, on a 202 or 405
	// only, the interstitial's own script: its gokuProps settings, or AWS WAF's challenge or captcha
	// script (*.awswaf.com, AwsWafIntegration, AwsWafCaptcha) on a small page read whole. Ordinary
	// pages load the same scripts through AWS WAF's JavaScript integrations (AWS WAF Developer Guide,
	// "AWS WAF JavaScript integrations"), so they count on neither a 200 nor a large page.
	AWSWAF = NewDetector("awswaf", func(s *Sample) bool {
		switch s.Header("X-Amzn-Waf-Action") {
		case "challenge", "captcha":
			return true
		}
		if code := s.Response.StatusCode; code != http.StatusAccepted && code != http.StatusMethodNotAllowed {
			return false
		}
		if s.Contains("gokuprops") {
			return true
		}
		return challengeShaped(s) && containsAny(s, "awswaf.com", "awswafintegration", "awswafcaptcha")
	})
	// Kasada matches Kasada's block answers: an error status (Kasada answers 429, sometimes 403 or
	// 428) with x-kpsdk-* headers, or with a body that loads Kasada's challenge script (the KPSDK
	// object and its ips.js). Kasada publishes no documentation; these markers are the ones public
	// write-ups on Kasada describe. Ordinary 2xx answers of a Kasada-protected API carry
	// x-kpsdk-ct too (a refreshed token), so a success status never matches.
	Kasada = NewDetector("kasada", func(s *Sample) bool {
		if s.Response.StatusCode < http.StatusBadRequest {
			return false
		}
		if hasHeaderPrefix(s.Response.Header, "X-Kpsdk-") {
			return true
		}
		return s.Contains("kpsdk") && s.Contains("ips.js")
	})
	// Captcha matches pages built around a captcha widget: reCAPTCHA (google.com/recaptcha/api.js,
	// the g-recaptcha element; reCAPTCHA developer guide), hCaptcha (hcaptcha.com/1/api.js, the
	// h-captcha element; hCaptcha developer docs) or Cloudflare Turnstile
	// (challenges.cloudflare.com/turnstile, the cf-turnstile element; Turnstile docs). On an error
	// status the widget is enough. On a 200 the page must be mostly the widget: read whole within the
	// peek, with no field a person types into and at most a few links, so a login, sign-up or
	// contact form that embeds a captcha is not a block.
	Captcha = NewDetector("captcha", func(s *Sample) bool {
		if s.Response.StatusCode == http.StatusOK && !s.Complete {
			return false // cannot be challenge-shaped: skip the scans
		}
		if !containsAny(s, "g-recaptcha", "google.com/recaptcha", "hcaptcha.com", "h-captcha",
			"cloudflare.com/turnstile", "cf-turnstile") {
			return false
		}
		return s.Response.StatusCode != http.StatusOK || challengeShaped(s)
	})
)

func containsAny(s *Sample, subs ...string) bool {
	for _, sub := range subs {
		if s.Contains(sub) {
			return true
		}
	}
	return false
}

// containsFold reports whether s contains sub, ignoring ASCII case, without allocating: it runs on
// header values of responses that may not be peeked at.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// cloudflareEdge: Server: cloudflare and CF-Ray are on every response Cloudflare proxies
// (Cloudflare docs, "Cloudflare HTTP headers").
func cloudflareEdge(h http.Header) bool {
	return headerValue(h, "Cf-Ray") != "" || containsFold(headerValue(h, "Server"), "cloudflare")
}

// impervaEdge: X-Iinfo (an opaque request id) is on every response Imperva Cloud WAF proxies, with
// X-CDN: Imperva (formerly Incapsula) on many.
func impervaEdge(h http.Header) bool {
	if headerValue(h, "X-Iinfo") != "" {
		return true
	}
	cdn := headerValue(h, "X-Cdn")
	return containsFold(cdn, "imperva") || containsFold(cdn, "incapsula")
}

// akamaiEdge: Server: AkamaiGHost marks a response the Akamai edge wrote itself (its error and deny
// pages); responses from the origin keep the origin's Server.
func akamaiEdge(h http.Header) bool { return containsFold(headerValue(h, "Server"), "akamaighost") }

// headerValue is h.Get(key) for a key already in canonical form, without canonicalizing it again:
// suspicious looks up several headers on every HTML 200 that is not small.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// hasHeaderPrefix reports whether h has a header whose canonical name starts with prefix.
func hasHeaderPrefix(h http.Header, prefix string) bool {
	for k := range h {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// DefaultDetectors are the detectors DefaultClassifier uses, vendors first and the generic captcha
// detector last, so a verdict names the vendor when one is recognised.
var DefaultDetectors = []Detector{Cloudflare, DataDome, PerimeterX, Akamai, Imperva, AWSWAF, Kasada, Captcha}

// challengeShaped reports whether the body is a whole page (read to its end within the peek) with
// no field a person types into and at most maxChallengeLinks links: the shape of an interstitial,
// as opposed to a page with a form or navigation.
func challengeShaped(s *Sample) bool {
	return s.Complete && countTags(s.Lower, "<a") <= maxChallengeLinks && !hasUserField(s.Lower)
}

// countTags counts the tags named by open ("<a") in the lower-cased html: open followed by white
// space, '/' or '>', so "<a" does not count "<abbr>" or "<article>".
func countTags(html []byte, open string) int {
	n := 0
	for rest := html; ; {
		i := bytes.Index(rest, []byte(open))
		if i < 0 {
			return n
		}
		rest = rest[i+len(open):]
		if len(rest) > 0 && isTagNameEnd(rest[0]) {
			n++
		}
	}
}

func isTagNameEnd(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '/' || c == '>'
}

// hasUserField reports whether the lower-cased html has a form field a person types into or picks
// from: a <select>, a <textarea> other than the captcha widgets' own response field (their
// <noscript> fallback carries one), or an <input> whose type is not hidden, a button or a box to
// tick (no type is a text field).
func hasUserField(html []byte) bool {
	for rest := html; ; {
		i := bytes.IndexByte(rest, '<')
		if i < 0 {
			return false
		}
		rest = rest[i+1:]
		var name string
		switch {
		case hasTagName(rest, "input"):
			name = "input"
		case hasTagName(rest, "textarea"):
			name = "textarea"
		case hasTagName(rest, "select"):
			return true
		default:
			continue
		}
		tag := rest[len(name):]
		if end := bytes.IndexByte(tag, '>'); end >= 0 {
			tag = tag[:end]
		}
		if name == "textarea" {
			if !bytes.Contains(tag, []byte("captcha-response")) {
				return true
			}
			continue
		}
		switch attrValue(tag, "type") {
		case "hidden", "submit", "button", "image", "reset", "checkbox", "radio":
		default:
			return true
		}
	}
}

// isAttrSep reports whether c may come right before an attribute name.
func isAttrSep(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '"' || c == '\''
}

// hasTagName reports whether b, the bytes after a '<', starts with the tag name.
func hasTagName(b []byte, name string) bool {
	return len(b) > len(name) && string(b[:len(name)]) == name && isTagNameEnd(b[len(name)])
}

// attrValue returns the value of the named attribute in a lower-cased tag's attribute text, quoted
// or not, or "" if the tag has no such attribute.
func attrValue(tag []byte, name string) string {
	for rest := tag; ; {
		i := bytes.Index(rest, []byte(name))
		if i < 0 {
			return ""
		}
		before := i > 0 && !isAttrSep(rest[i-1]) // part of a longer name, such as data-type
		rest = rest[i+len(name):]
		v := bytes.TrimLeft(rest, " \t\n\r\f")
		if before || len(v) == 0 || v[0] != '=' {
			continue
		}
		v = bytes.TrimLeft(v[1:], " \t\n\r\f")
		if len(v) > 0 && (v[0] == '"' || v[0] == '\'') {
			q := v[0]
			v = v[1:]
			if end := bytes.IndexByte(v, q); end >= 0 {
				v = v[:end]
			}
		} else if end := bytes.IndexAny(v, " \t\n\r\f/"); end >= 0 {
			v = v[:end]
		}
		return string(bytes.TrimSpace(v))
	}
}

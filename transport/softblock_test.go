package transport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/proxybreaker/proxybreaker/pool"
)

// softblockBody is a response body that counts the bytes read from it and whether it was closed.
type softblockBody struct {
	r      io.Reader
	n      int
	closed bool
}

func (b *softblockBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += n
	return n, err
}

func (b *softblockBody) Close() error { b.closed = true; return nil }

// softblockSample builds a Sample for a detector, as the classifier would.
func softblockSample(code int, body string, complete bool, kv ...string) *Sample {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	b := []byte(body)
	return &Sample{Response: &http.Response{StatusCode: code, Header: h}, Body: b, Lower: lowerASCII(b), Complete: complete}
}

// softblockPattern returns n bytes that differ from one offset to the next.
func softblockPattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%23 + i/23%3)
	}
	return b
}

var errSoftblockBoom = errors.New("softblock test: connection died")

func TestBuiltinDetectors(t *testing.T) {
	tests := []struct {
		name string
		d    Detector
		s    *Sample
		want bool
	}{
		{"cf header", Cloudflare, softblockSample(403, "", false, "Cf-Mitigated", "challenge"), true},
		{"cf header case", Cloudflare, softblockSample(200, "", false, "Cf-Mitigated", "Challenge"), true},
		{"cf header other value", Cloudflare, softblockSample(403, "", false, "Cf-Mitigated", "block"), false},
		{"cf platform script", Cloudflare, softblockSample(200, `<script src="/cdn-cgi/challenge-platform/h/b/orchestrate"></script>`, false), true},
		{"cf chl opt", Cloudflare, softblockSample(503, `window._cf_chl_opt={}`, false), true},
		{"cf browser verification", Cloudflare, softblockSample(503, `<div class="cf-browser-verification">`, false), true},
		{"cf title + server", Cloudflare, softblockSample(403, "<TITLE>Just a moment...</TITLE>", true, "Server", "cloudflare"), true},
		{"cf title + ray", Cloudflare, softblockSample(503, "<title>Just a moment...</title>", true, "Cf-Ray", "abc-LHR"), true},
		{"cf attention + server", Cloudflare, softblockSample(403, "Attention Required! | Cloudflare", true, "Server", "Cloudflare"), true},
		{"cf error details", Cloudflare, softblockSample(403, `<div id="cf-error-details">`, true, "Server", "cloudflare"), true},
		// Regression (issue 12): a 200 "Just a moment..." page from Cloudflare without cf-mitigated
		// passed for success, and a crawl stopped after one page.
		{"cf title on 200", Cloudflare, softblockSample(200, "<title>Just a moment...</title>", false, "Server", "cloudflare"), true},
		{"cf title on 200, ray only", Cloudflare, softblockSample(200, "<title>Just a moment...</title>", false, "Cf-Ray", "8a1b-LHR"), true},
		{"cf title on 200 without cf headers", Cloudflare, softblockSample(200, "<title>Just a moment...</title>", true, "Server", "nginx"), false},
		{"cf attention on 200", Cloudflare, softblockSample(200, "<title>Attention Required! | Cloudflare</title>", true, "Server", "cloudflare"), true},
		{"cf error details on 200", Cloudflare, softblockSample(200, `<div id="cf-error-details">`, true, "Server", "cloudflare"), false},
		{"cf orchestrate without platform path", Cloudflare, softblockSample(403, `/orchestrate/jsch/v1`, true), false},
		// Cloudflare's JavaScript detections put this beacon on ordinary pages.
		{"cf jsd beacon on 200", Cloudflare, softblockSample(200,
			`<script>window.__CF$cv$params={r:'8a1b'};a.src='/cdn-cgi/challenge-platform/scripts/jsd/main.js';</script>`, true,
			"Server", "cloudflare"), false},
		{"cf jsd beacon on 403", Cloudflare, softblockSample(403,
			`<script>a.src='/cdn-cgi/challenge-platform/h/b/scripts/jsd/1a2b/main.js';</script>`, true, "Server", "cloudflare"), false},
		{"cf title without cf headers", Cloudflare, softblockSample(403, "<title>Just a moment...</title>", true, "Server", "nginx"), false},
		{"cf server, plain page", Cloudflare, softblockSample(403, "forbidden", true, "Server", "cloudflare"), false},

		{"datadome body", DataDome, softblockSample(200, `geo.captcha-delivery.com`, false), true},
		{"datadome body case", DataDome, softblockSample(403, `GEO.CAPTCHA-DELIVERY.COM`, false), true},
		{"datadome header on 403", DataDome, softblockSample(403, "", false, "X-Datadome", "protected"), true},
		{"datadome header on 200", DataDome, softblockSample(200, "<html>ok</html>", true, "X-Datadome", "protected"), false},
		{"datadome nothing", DataDome, softblockSample(403, "forbidden", true), false},

		{"px captcha", PerimeterX, softblockSample(403, `<div id="px-captcha">`, false), true},
		{"px app id", PerimeterX, softblockSample(403, `window._pxAppId = "PX123"`, false), true},
		{"px cdn on 403", PerimeterX, softblockSample(403, `https://client.px-cdn.net/PX123/main.min.js`, false), true},
		// Every PerimeterX-protected page loads the sensor: on a 200 only the block page's captcha counts.
		{"px cdn on 200", PerimeterX, softblockSample(200, `https://client.px-cdn.net/PX123/main.min.js`, true), false},
		{"px app id on 200", PerimeterX, softblockSample(200, `window._pxAppId = "PX123"`, true), false},
		{"px captcha on 200", PerimeterX, softblockSample(200, `<div id="px-captcha"></div>`, false), true},
		{"px name", PerimeterX, softblockSample(403, `Powered by PerimeterX`, false), true},
		{"px nothing", PerimeterX, softblockSample(403, "forbidden", true), false},

		{"akamai", Akamai, softblockSample(403, "<H1>Access Denied</H1> Reference #18.abc.123", false), true},
		{"akamai escaped", Akamai, softblockSample(403, "Access Denied. Reference&#32;&#35;18.abc", false), true},
		{"akamai on 200", Akamai, softblockSample(200, "Access Denied Reference #18.abc", true), false},
		{"akamai no reference", Akamai, softblockSample(403, "Access Denied", true), false},
		{"akamai no denial", Akamai, softblockSample(403, "Reference #18.abc", true), false},
		{"akamai on 200 from the edge", Akamai, softblockSample(200, "Access Denied Reference #18.abc", false, "Server", "AkamaiGHost"), true},
		{"akamai on 200 with edgesuite link", Akamai, softblockSample(200,
			"Access Denied. Reference&#32;&#35;18.abc <p>https&#58;&#47;&#47;errors&#46;edgesuite&#46;net&#47;18.abc</p>", false), true},
		{"akamai on 503 without edge", Akamai, softblockSample(503, "Access Denied Reference #18.abc", true, "Server", "nginx"), false},
		{"akamai sec-cpt on 200", Akamai, softblockSample(200, `<div id="sec-if-cpt-container"></div>`, true), true},
		{"akamai sec-cpt on 200, incomplete", Akamai, softblockSample(200, `<div id="sec-if-cpt-container"></div>`, false), false},
		{"akamai cp_challenge on 428", Akamai, softblockSample(428, `{"branding_url_content":"/_sec/cp_challenge/crypto_message-4-3.htm"}`, false), true},
		{"akamai sec-cp-challenge on 428", Akamai, softblockSample(428, `{"sec-cp-challenge": "true","provider":"crypto"}`, false), true},
		{"akamai sec-cp-challenge on 200", Akamai, softblockSample(200, `if (r["sec-cp-challenge"]) {}`, true), false},
		{"akamai powered by on 403", Akamai, softblockSample(403, "Powered and protected by Akamai", true), true},
		{"akamai cookies only", Akamai, softblockSample(200, "<html>shop</html>", true, "Set-Cookie", "_abck=x", "Set-Cookie", "bm_sz=y"), false},

		{"imperva incident id", Imperva, softblockSample(200, "Request unsuccessful. Incapsula incident ID: 123-456", false), true},
		{"imperva iframe resource", Imperva, softblockSample(200,
			`<iframe id="main-iframe" src="/_Incapsula_Resource?CWUDNSAI=9&incident_id=123-456&edet=15"></iframe>`, false), true},
		{"imperva injected script", Imperva, softblockSample(200,
			`<script src="/_Incapsula_Resource?SWJIYLWA=719d34d31c8e3a6e"></script>`, true, "X-Iinfo", "12-345-678 NNNN CT(0 0 0)"), false},
		{"imperva header only", Imperva, softblockSample(403, "forbidden", true, "X-Iinfo", "12-345-678 NNNN", "X-Cdn", "Imperva"), false},
		{"imperva security service, header", Imperva, softblockSample(403,
			"This request was blocked by our security service", true, "X-Cdn", "Incapsula"), true},
		{"imperva security service, named", Imperva, softblockSample(403,
			"This request was blocked by our security service. Powered by Imperva", true), true},
		{"imperva security service, unnamed", Imperva, softblockSample(403,
			"This request was blocked by our security service", true, "Server", "nginx"), false},
		{"imperva abp", Imperva, softblockSample(200, "<title>Pardon Our Interruption</title>", false), true},

		{"awswaf challenge header", AWSWAF, softblockSample(202, "", true, "X-Amzn-Waf-Action", "challenge"), true},
		{"awswaf captcha header", AWSWAF, softblockSample(405, "", true, "X-Amzn-Waf-Action", "CAPTCHA"), true},
		{"awswaf other header value", AWSWAF, softblockSample(202, "", true, "X-Amzn-Waf-Action", "count"), false},
		{"awswaf goku on 202", AWSWAF, softblockSample(202, `window.gokuProps = {"key":"k"}`, false), true},
		{"awswaf goku on 200", AWSWAF, softblockSample(200, `window.gokuProps = {"key":"k"}`, true), false},
		{"awswaf script on small 405", AWSWAF, softblockSample(405,
			`<script src="https://ab12.token.awswaf.com/ab12/cd34/challenge.js"></script>`, true), true},
		{"awswaf script on 405, incomplete", AWSWAF, softblockSample(405,
			`<script src="https://ab12.token.awswaf.com/ab12/cd34/challenge.js"></script>`, false), false},
		{"awswaf script on 200", AWSWAF, softblockSample(200,
			`<script src="https://ab12.edge.sdk.awswaf.com/ab12/cd34/challenge.js"></script>`, true), false},

		{"kasada header on 429", Kasada, softblockSample(429, "", true, "X-Kpsdk-Ct", "0abc"), true},
		{"kasada header on 403", Kasada, softblockSample(403, "", true, "X-Kpsdk-R", "1-AAA"), true},
		{"kasada header on 200", Kasada, softblockSample(200, `{"items":[]}`, true, "X-Kpsdk-Ct", "0abc"), false},
		{"kasada body on 429", Kasada, softblockSample(429,
			`<script>window.KPSDK={};</script><script src="/149e/2d20/ips.js?tkrm_alpekz_s1.3=abc"></script>`, true), true},
		{"kasada ips.js alone", Kasada, softblockSample(429, `<script src="/ips.js"></script>`, true), false},
		{"kasada plain 429", Kasada, softblockSample(429, "slow down", true, "Retry-After", "5"), false},

		{"recaptcha 403", Captcha, softblockSample(403, `<div class="g-recaptcha">`, false), true},
		{"recaptcha script", Captcha, softblockSample(403, `https://www.google.com/recaptcha/api.js`, false), true},
		{"hcaptcha", Captcha, softblockSample(403, `https://hcaptcha.com/1/api.js`, false), true},
		{"h-captcha", Captcha, softblockSample(429, `<div class="h-captcha">`, false), true},
		{"turnstile", Captcha, softblockSample(403, `https://challenges.cloudflare.com/turnstile/v0/api.js`, false), true},
		{"cf-turnstile", Captcha, softblockSample(503, `<div class="CF-Turnstile">`, false), true},
		{"captcha 200 complete", Captcha, softblockSample(200, `<div class="g-recaptcha">`, true), true},
		{"captcha 200 login form", Captcha, softblockSample(200,
			`<form><input name="user"><input type="password" name="pw"><div class="g-recaptcha"></div></form>`, true), false},
		{"captcha 200 contact form", Captcha, softblockSample(200,
			`<form><textarea name="msg"></textarea><div class="h-captcha"></div></form>`, true), false},
		{"captcha 200 search box", Captcha, softblockSample(200,
			`<form><select name="c"><option>a</option></select><div class="cf-turnstile"></div></form>`, true), false},
		{"captcha 200 with navigation", Captcha, softblockSample(200,
			`<a href="/">home</a><a href="/a">a</a><a href="/b">b</a><a href="/c">c</a><div class="g-recaptcha"></div>`, true), false},
		{"captcha 200 gate with hidden fields", Captcha, softblockSample(200,
			`<form method="post"><input type="hidden" name="t" value="1"><div class="g-recaptcha"></div>`+
				`<noscript><textarea name="g-recaptcha-response" class="g-recaptcha-response"></textarea></noscript>`+
				`<input type=submit value="Continue"></form><a href="/privacy">privacy</a>`, true), true},
		{"captcha login form on 403", Captcha, softblockSample(403,
			`<form><input type="password"><div class="g-recaptcha"></div></form>`, true), true},
		{"captcha 200 incomplete", Captcha, softblockSample(200, `<div class="g-recaptcha">`, false), false},
		{"captcha 200 complete, none", Captcha, softblockSample(200, `<form>login</form>`, true), false},
		{"captcha 403 nothing", Captcha, softblockSample(403, "forbidden", true), false},
		{"captcha no body", Captcha, &Sample{Response: &http.Response{StatusCode: 403}, Complete: true}, false},
	}
	for _, tt := range tests {
		if got := tt.d.Detect(tt.s); got != tt.want {
			t.Errorf("%s: %s.Detect(%d %q %v complete=%v) = %v, want %v",
				tt.name, tt.d.Name(), tt.s.Response.StatusCode, tt.s.Body, tt.s.Response.Header, tt.s.Complete, got, tt.want)
		}
	}
}

func TestDefaultDetectorsNames(t *testing.T) {
	want := []string{"cloudflare", "datadome", "perimeterx", "akamai", "imperva", "awswaf", "kasada", "captcha"}
	if len(DefaultDetectors) != len(want) {
		t.Fatalf("len(DefaultDetectors) = %d, want %d", len(DefaultDetectors), len(want))
	}
	for i, d := range DefaultDetectors {
		if d.Name() != want[i] {
			t.Errorf("DefaultDetectors[%d].Name() = %q, want %q", i, d.Name(), want[i])
		}
	}
}

func TestSampleHelpers(t *testing.T) {
	s := softblockSample(403, "Hello WORLD", true, "X-Thing", "MiXeD")
	if !s.Contains("hello world") || s.Contains("HELLO") || s.Contains("bye") {
		t.Errorf("Sample.Contains on %q: lower-case match %v, upper-case %v, absent %v, want true, false, false",
			s.Body, s.Contains("hello world"), s.Contains("HELLO"), s.Contains("bye"))
	}
	if got := s.Header("x-thing"); got != "mixed" {
		t.Errorf("Sample.Header(%q) = %q, want %q", "x-thing", got, "mixed")
	}
	if got := s.Header("Missing"); got != "" {
		t.Errorf("Sample.Header(%q) = %q, want empty", "Missing", got)
	}
	nilHeader := &Sample{Response: &http.Response{StatusCode: 403}}
	if got := nilHeader.Header("Server"); got != "" || nilHeader.Contains("x") {
		t.Errorf("Sample with nil header and body: Header = %q, Contains = %v, want empty, false", got, nilHeader.Contains("x"))
	}
	if got := lowerASCII([]byte("ÀBC-Ünï")); string(got) != "Àbc-Ünï" {
		t.Errorf("lowerASCII(%q) = %q, want %q", "ÀBC-Ünï", got, "Àbc-Ünï")
	}
}

func TestSuspicious(t *testing.T) {
	html := []string{"Content-Type", "text/html; charset=utf-8"}
	tests := []struct {
		name string
		resp *http.Response
		want bool
	}{
		{"403", classifyResp(403, "x", true), true},
		{"429", classifyResp(429, "", false), true},
		{"503", classifyResp(503, "x", true), true},
		{"200 html small", classifyResp(200, "<html></html>", false, html...), true},
		{"200 xhtml small", classifyResp(200, "<html></html>", false, "Content-Type", "application/xhtml+xml"), true},
		{"200 html empty", classifyResp(200, "", false, html...), true},
		{"200 html unknown length", classifyResp(200, "<html></html>", true, html...), false},
		{"200 html unknown length, cf-mitigated", classifyResp(200, "x", true, "Cf-Mitigated", "challenge", "Content-Type", "text/html"), true},
		{"200 html unknown length, x-datadome", classifyResp(200, "x", true, "X-Datadome", "1", "Content-Type", "text/html"), true},
		{"200 json", classifyResp(200, "{}", false, "Content-Type", "application/json"), false},
		{"200 no content type", classifyResp(200, "<html></html>", false), false},
		{"200 json, cf-mitigated", classifyResp(200, "{}", false, "Cf-Mitigated", "challenge", "Content-Type", "application/json"), false},
		{"200 html unknown length, server cloudflare", classifyResp(200, "x", true, "Server", "cloudflare", html[0], html[1]), true},
		{"200 html unknown length, server Cloudflare", classifyResp(200, "x", true, "Server", "Cloudflare", html[0], html[1]), true},
		{"200 html unknown length, cf-ray", classifyResp(200, "x", true, "Cf-Ray", "8a1b-LHR", html[0], html[1]), true},
		{"200 html unknown length, x-iinfo", classifyResp(200, "x", true, "X-Iinfo", "1-2-3 NNNN", html[0], html[1]), true},
		{"200 html unknown length, x-cdn imperva", classifyResp(200, "x", true, "X-Cdn", "Imperva", html[0], html[1]), true},
		{"200 html unknown length, x-cdn other", classifyResp(200, "x", true, "X-Cdn", "Fastly", html[0], html[1]), false},
		{"200 html unknown length, akamaighost", classifyResp(200, "x", true, "Server", "AkamaiGHost", html[0], html[1]), true},
		{"200 html unknown length, aws waf", classifyResp(200, "x", true, "X-Amzn-Waf-Action", "challenge", html[0], html[1]), true},
		{"200 html unknown length, sec_cpt cookie", classifyResp(200, "x", true, "Set-Cookie", "sec_cpt=0A1B~1~-1; Path=/", html[0], html[1]), true},
		{"200 html unknown length, other cookie", classifyResp(200, "x", true, "Set-Cookie", "_abck=0A1B~-1; Path=/", html[0], html[1]), false},
		{"200 html unknown length, server nginx", classifyResp(200, "x", true, "Server", "nginx", html[0], html[1]), false},
		{"200 json, server cloudflare", classifyResp(200, "{}", true, "Server", "cloudflare", "Content-Type", "application/json"), false},
		{"428", classifyResp(428, "{}", false, "Content-Type", "application/json"), true},
		{"202 aws waf", classifyResp(202, "", false, "X-Amzn-Waf-Action", "challenge"), true},
		{"202 html", classifyResp(202, "<html></html>", false, html...), true},
		{"202 json", classifyResp(202, `{"job":1}`, false, "Content-Type", "application/json"), false},
		{"405 aws waf", classifyResp(405, "", false, "X-Amzn-Waf-Action", "captcha"), true},
		{"405 plain", classifyResp(405, "", false), false},
		{"404", classifyResp(404, "<html></html>", false, html...), false},
		{"404 cloudflare", classifyResp(404, "<html></html>", true, "Server", "cloudflare", html[0], html[1]), false},
		{"500", classifyResp(500, "x", false, html...), false},
		{"502", classifyResp(502, "x", false, html...), false},
		{"301", classifyResp(301, "", false, html...), false},
	}
	for _, tt := range tests {
		if got := suspicious(tt.resp); got != tt.want {
			t.Errorf("%s: suspicious(%d, %v, length %d) = %v, want %v", tt.name, tt.resp.StatusCode, tt.resp.Header, tt.resp.ContentLength, got, tt.want)
		}
	}
	for _, n := range []int64{smallPage - 1, smallPage} {
		r := classifyResp(200, "", false, html...)
		r.ContentLength = n
		if !suspicious(r) {
			t.Errorf("suspicious(200 html, length %d) = false, want true", n)
		}
	}
	r := classifyResp(200, "", false, html...)
	r.ContentLength = smallPage + 1
	if suspicious(r) {
		t.Errorf("suspicious(200 html, length %d) = true, want false", smallPage+1)
	}
}

// softblockPeekCase runs c on a suspicious response whose body is body (wrapped as wrap says),
// checks that at most the peek limit was read before the verdict, and that the caller then reads
// the body byte for byte, ending in wantErr.
func softblockPeekCase(t *testing.T, name string, c *StandardClassifier, code int, ct string, body []byte,
	knownLen bool, wrap func(io.Reader) io.Reader, tail error) (v pool.Verdict, peeked int) {
	t.Helper()
	var r io.Reader = bytes.NewReader(body)
	if tail != nil {
		r = io.MultiReader(r, iotest.ErrReader(tail))
	}
	if wrap != nil {
		r = wrap(r)
	}
	sb := &softblockBody{r: r}
	resp := classifyResp(code, "", !knownLen, "Content-Type", ct)
	resp.Body = sb
	if knownLen {
		resp.ContentLength = int64(len(body))
	}
	a := classifyRespAttempt(resp)
	v = c.Classify(a)
	peeked = sb.n
	limit := c.PeekLimit
	if limit <= 0 {
		limit = DefaultPeekLimit
	}
	if sb.n > limit {
		t.Errorf("%s: pool.Classify read %d bytes before its verdict, want at most %d", name, sb.n, limit)
	}
	if sb.closed {
		t.Errorf("%s: pool.Classify closed the body", name)
	}
	got, err := io.ReadAll(a.Response.Body)
	if !bytes.Equal(got, body) {
		t.Errorf("%s: caller read %d bytes, want the %d bytes sent, identical (first difference at %d)",
			name, len(got), len(body), softblockFirstDiff(got, body))
	}
	wantErr := tail
	if wantErr == io.EOF {
		wantErr = nil // io.ReadAll reports a clean end as nil
	}
	if err != wantErr {
		t.Errorf("%s: caller's read ended with %v, want %v", name, err, wantErr)
	}
	if err := a.Response.Body.Close(); err != nil || !sb.closed {
		t.Errorf("%s: Body.Close() after pool.Classify = %v, closed the original %v, want nil, true", name, err, sb.closed)
	}
	return v, peeked
}

func softblockFirstDiff(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestPeekKeepsBodyIntact(t *testing.T) {
	wraps := map[string]func(io.Reader) io.Reader{
		"plain":    nil,
		"one byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
		"data+EOF": iotest.DataErrReader,
	}
	for _, limit := range []int{0, 1, 64, 1000} {
		c := &StandardClassifier{Detectors: DefaultDetectors, PeekLimit: limit}
		eff := limit
		if eff == 0 {
			eff = DefaultPeekLimit
		}
		for _, size := range []int{0, 1, eff - 1, eff, eff + 1, 3*eff + 7} {
			if size < 0 {
				continue
			}
			body := softblockPattern(size)
			for wname, wrap := range wraps {
				for _, knownLen := range []bool{true, false} {
					for _, code := range []int{403, 429, 503} {
						name := fmt.Sprintf("limit %d, %d bytes, %s, known length %v, %d", limit, size, wname, knownLen, code)
						v, _ := softblockPeekCase(t, name, c, code, "text/html", body, knownLen, wrap, nil)
						if v.Class == pool.ClassBodyRead || v.Class == pool.ClassBlocked {
							t.Errorf("%s: pool.Classify = %+v, want no body_read or blocked verdict", name, v)
						}
					}
				}
			}
		}
	}
}

func TestPeekReadsAtMostTheLimit(t *testing.T) {
	for _, limit := range []int{1, 100, DefaultPeekLimit} {
		c := &StandardClassifier{Detectors: DefaultDetectors, PeekLimit: limit}
		for _, knownLen := range []bool{true, false} {
			name := fmt.Sprintf("limit %d, known length %v", limit, knownLen)
			_, peeked := softblockPeekCase(t, name, c, 403, "text/html", softblockPattern(10*limit+3), knownLen, nil, nil)
			if peeked != limit {
				t.Errorf("%s: pool.Classify read %d bytes, want exactly %d", name, peeked, limit)
			}
		}
	}
	// PeekLimit 0 is DefaultPeekLimit.
	_, peeked := softblockPeekCase(t, "limit 0", &StandardClassifier{Detectors: DefaultDetectors},
		403, "text/html", softblockPattern(3*DefaultPeekLimit), false, nil, nil)
	if peeked != DefaultPeekLimit {
		t.Errorf("PeekLimit 0: pool.Classify read %d bytes, want DefaultPeekLimit (%d)", peeked, DefaultPeekLimit)
	}
}

func TestPeekSkipsOrdinaryResponses(t *testing.T) {
	body := softblockPattern(2000)
	tests := []struct {
		code     int
		ct       string
		knownLen bool
		want     pool.Verdict
	}{
		{200, "application/json", true, pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}},
		{200, "text/html", false, pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}},
		{200, "image/png", true, pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}},
		{404, "text/html", true, pool.Verdict{Outcome: pool.Success, Class: pool.ClassOrigin4xx}},
		{301, "text/html", true, pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}},
		{500, "text/html", true, pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassOriginError}},
		{502, "text/html", true, pool.Verdict{Outcome: pool.Transient, Class: pool.ClassOrigin5xx, Soft: true}},
		{504, "text/html", true, pool.Verdict{Outcome: pool.Transient, Class: pool.ClassOrigin5xx, Soft: true}},
		{407, "text/html", true, pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%d %s known length %v", tt.code, tt.ct, tt.knownLen)
		sb := &softblockBody{r: bytes.NewReader(body)}
		resp := classifyResp(tt.code, "", !tt.knownLen, "Content-Type", tt.ct)
		resp.Body = sb
		if tt.knownLen {
			resp.ContentLength = int64(len(body))
		}
		a := classifyRespAttempt(resp)
		if got := DefaultClassifier.Classify(a); got != tt.want {
			t.Errorf("%s: pool.Classify = %+v, want %+v", name, got, tt.want)
		}
		if sb.n != 0 || a.Response.Body != io.ReadCloser(sb) {
			t.Errorf("%s: pool.Classify read %d bytes (body replaced: %v), want 0 and the body untouched",
				name, sb.n, a.Response.Body != io.ReadCloser(sb))
		}
	}
	// A large 200 HTML page is not read either.
	sb := &softblockBody{r: bytes.NewReader(body)}
	resp := classifyResp(200, "", false, "Content-Type", "text/html")
	resp.Body, resp.ContentLength = sb, smallPage+1
	DefaultClassifier.Classify(classifyRespAttempt(resp))
	if sb.n != 0 {
		t.Errorf("pool.Classify(200 html, length %d) read %d bytes, want 0", smallPage+1, sb.n)
	}
}

func TestPeekErrorAfterThePeekReachesTheCaller(t *testing.T) {
	c := &StandardClassifier{Detectors: DefaultDetectors, PeekLimit: 64}
	for _, knownLen := range []bool{false, true} {
		name := fmt.Sprintf("known length %v", knownLen)
		body := softblockPattern(200)
		v, _ := softblockPeekCase(t, name, c, 403, "text/html", body, knownLen, nil, errSoftblockBoom)
		if want := (pool.Verdict{Outcome: pool.Success, Class: pool.ClassOrigin4xx, Suspect: true}); v != want {
			t.Errorf("%s: pool.Classify(403, dies after the peek) = %+v, want %+v", name, v, want)
		}
	}
}

func TestPeekErrorInsideThePeek(t *testing.T) {
	c := &StandardClassifier{Detectors: DefaultDetectors, PeekLimit: 64}
	body := []byte(`<div class="g-recaptcha">`)
	for _, callerDone := range []bool{false, true} {
		for _, knownLen := range []bool{false, true} {
			name := fmt.Sprintf("caller done %v, known length %v", callerDone, knownLen)
			sb := &softblockBody{r: io.MultiReader(bytes.NewReader(body), iotest.ErrReader(errSoftblockBoom))}
			resp := classifyResp(403, "", !knownLen, "Content-Type", "text/html")
			resp.Body = sb
			if knownLen {
				resp.ContentLength = 100 // more than arrives
			}
			a := classifyRespAttempt(resp)
			a.CallerDone = callerDone
			want := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBodyRead, ConnLevel: true}
			if callerDone {
				want = pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled}
			}
			if got := c.Classify(a); got != want {
				t.Errorf("%s: pool.Classify(403, dies inside the peek) = %+v, want %+v", name, got, want)
			}
			got, err := io.ReadAll(a.Response.Body)
			if !bytes.Equal(got, body) || err != errSoftblockBoom {
				t.Errorf("%s: caller read %q, %v, want %q, %v", name, got, err, body, errSoftblockBoom)
			}
			// The error stays: a second read says the same.
			if n, err := a.Response.Body.Read(make([]byte, 8)); n != 0 || err != errSoftblockBoom {
				t.Errorf("%s: Read after the error = %d, %v, want 0, %v", name, n, err, errSoftblockBoom)
			}
		}
	}
}

func TestPeekNoBody(t *testing.T) {
	for _, body := range []io.ReadCloser{nil, http.NoBody} {
		resp := classifyResp(403, "", false, "Cf-Mitigated", "challenge")
		resp.Body = body
		a := classifyRespAttempt(resp)
		want := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, Detector: "cloudflare"}
		if got := DefaultClassifier.Classify(a); got != want {
			t.Errorf("pool.Classify(403 cf-mitigated, body %v) = %+v, want %+v", body, got, want)
		}
		if a.Response.Body != body {
			t.Errorf("pool.Classify(403, body %v) replaced the body with %v", body, a.Response.Body)
		}
	}
	var seen *Sample
	c := &StandardClassifier{Detectors: []Detector{NewDetector("spy", func(s *Sample) bool { seen = s; return false })}}
	resp := classifyResp(403, "", false)
	resp.Body = http.NoBody
	c.Classify(classifyRespAttempt(resp))
	if seen == nil || len(seen.Body) != 0 || !seen.Complete {
		t.Errorf("Sample for http.NoBody = %+v, want an empty, complete body", seen)
	}
}

// Regression: the peek used io.ReadFull, which turns an early EOF into io.ErrUnexpectedEOF, and
// treated io.ErrUnexpectedEOF as the end of the body. net/http reports a body cut short of its
// Content-Length with io.ErrUnexpectedEOF, so a truncated page passed for a complete one and the
// caller read a clean EOF instead of the error.
func TestPeekTruncatedBodyIsNotComplete(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const partial = `<html><div class="g-recaptcha"></div>`
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		http.ReadRequest(bufio.NewReader(c))
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000\r\n\r\n%s", partial)
	}()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := classifyRespAttempt(resp)
	want := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBodyRead, ConnLevel: true}
	if got := DefaultClassifier.Classify(a); got != want {
		t.Errorf("pool.Classify(200 html cut short of its Content-Length) = %+v, want %+v", got, want)
	}
	got, err := io.ReadAll(a.Response.Body)
	if string(got) != partial || err != io.ErrUnexpectedEOF {
		t.Errorf("caller read %q, %v, want %q, io.ErrUnexpectedEOF", got, err, partial)
	}
}

// Regression: a body exactly as long as the peek limit, with a Content-Length saying so, was read
// whole but reported incomplete, so a small 200 captcha page of that size was not recognised.
func TestPeekBodyExactlyTheLimitIsComplete(t *testing.T) {
	const limit = 64
	body := `<div class="g-recaptcha"></div>`
	body += strings.Repeat(" ", limit-len(body))
	c := &StandardClassifier{Detectors: DefaultDetectors, PeekLimit: limit}
	v, peeked := softblockPeekCase(t, "exactly the limit", c, 200, "text/html", []byte(body), true, nil, nil)
	if want := (pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, Detector: "captcha"}); v != want {
		t.Errorf("pool.Classify(200 html captcha page of exactly %d bytes) = %+v, want %+v", limit, v, want)
	}
	if peeked != limit {
		t.Errorf("pool.Classify read %d bytes, want %d", peeked, limit)
	}
	// Without a Content-Length the classifier cannot know it has it all.
	var complete bool
	spy := &StandardClassifier{Detectors: []Detector{NewDetector("spy", func(s *Sample) bool { complete = s.Complete; return false })}, PeekLimit: limit}
	softblockPeekCase(t, "exactly the limit, unknown length", spy, 403, "text/html", []byte(body), false, nil, nil)
	if complete {
		t.Errorf("Sample.Complete for %d bytes of unknown length at limit %d = true, want false", limit, limit)
	}
}

// BenchmarkClassifySoftblock measures what the default classifier costs on responses that are not
// challenges: a JSON 200 and an HTML 200 of unknown length (neither may be peeked at), an HTML 200
// served through a vendor's edge, and the same page under 32 KiB with its length (both peeked at,
// 4 KiB). Each op builds nothing but the body reader.
func BenchmarkClassifySoftblock(b *testing.B) {
	page := strings.Repeat("<p>catalogue entry</p>\n", 400) // ~9 KiB, no markers
	cases := []struct {
		name       string
		body       string
		unknownLen bool
		kv         []string
	}{
		{"json-200", `{"ok":true}` + "\n", false, []string{"Content-Type", "application/json"}},
		{"html-200-unknown-length", page, true, []string{"Content-Type", "text/html; charset=utf-8"}},
		{"html-200-known-length", page, false, []string{"Content-Type", "text/html; charset=utf-8"}},
		{"html-200-cloudflare-unknown-length", page, true,
			[]string{"Content-Type", "text/html; charset=utf-8", "Server", "cloudflare", "Cf-Ray", "8a1b2c3d4e5f6a7b-LHR"}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			resp := classifyResp(200, "", c.unknownLen, c.kv...)
			if !c.unknownLen {
				resp.ContentLength = int64(len(c.body))
			}
			a := classifyRespAttempt(resp)
			r := strings.NewReader(c.body)
			body := io.NopCloser(r)
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(c.body)
				resp.Body = body
				if v := DefaultClassifier.Classify(a); v.Class != pool.ClassOK {
					b.Fatalf("Classify = %+v, want ok", v)
				}
			}
		})
	}
}

func TestChallengeShapeHelpers(t *testing.T) {
	links := []struct {
		html string
		want int
	}{
		{``, 0},
		{`<a href="/">x</a>`, 1},
		{"<a>x</a><a\nhref=/>y</a><a/>", 3},
		{`<abbr>x</abbr><article><aside>`, 0},
		{`<a`, 0}, // cut off by the peek
		{`<a href=1><a href=2><a href=3><a href=4>`, 4},
	}
	for _, tt := range links {
		if got := countTags([]byte(tt.html), "<a"); got != tt.want {
			t.Errorf("countTags(%q, <a) = %d, want %d", tt.html, got, tt.want)
		}
	}
	fields := []struct {
		html string
		want bool
	}{
		{``, false},
		{`<input>`, true},
		{`<input name=q>`, true},
		{`<input type="password">`, true},
		{`<input type='email'>`, true},
		{`<input type=search>`, true},
		{`<input type = "text">`, true},
		{`<input type="hidden" name="t"><input type=submit><input type="button"><input type="checkbox">`, false},
		{`<input data-type="hidden">`, true},              // data-type is not type: no type is a text field
		{`<input data-type="text" type="hidden">`, false}, // the real type is found after data-type
		{`<input name="type" type="hidden">`, false},
		{`<input/type="hidden">`, true}, // '/' before the name: not an attribute boundary we know
		{`<textarea name="msg"></textarea>`, true},
		{`<noscript><textarea name="g-recaptcha-response"></textarea></noscript>`, false},
		{`<noscript><textarea name="h-captcha-response"></textarea></noscript>`, false},
		{`<select name="c"></select>`, true},
		{`<inputs><textareas><selection>`, false},
		{`<input type="hidden"`, false}, // cut off by the peek
		{`<input type="`, true},         // cut off inside the value: an unknown type is a field
		{`<`, false},
		{`<input`, false},
		{`<<<<input >`, true},
	}
	for _, tt := range fields {
		if got := hasUserField([]byte(tt.html)); got != tt.want {
			t.Errorf("hasUserField(%q) = %v, want %v", tt.html, got, tt.want)
		}
	}
}

// FuzzChallengeShape: the HTML scanners see hostile bytes; they must not panic or loop, and a page
// with more links than maxChallengeLinks is never challenge-shaped.
func FuzzChallengeShape(f *testing.F) {
	for _, s := range []string{``, `<a href=1>`, `<input type="hidden">`, `<textarea name=x>`, `<input type='`, `<<a<a `, "<input\x00type=x>"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		lower := lowerASCII(b)
		n := countTags(lower, "<a")
		_ = hasUserField(lower)
		s := &Sample{Response: &http.Response{StatusCode: 200, Header: http.Header{}}, Body: b, Lower: lower, Complete: true}
		if n > maxChallengeLinks && challengeShaped(s) {
			t.Fatalf("challengeShaped(%q) = true with %d links", b, n)
		}
		for _, d := range DefaultDetectors {
			d.Detect(s)
		}
	})
}

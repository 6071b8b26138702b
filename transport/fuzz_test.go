package transport

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
)

func FuzzParseRetryAfter(f *testing.F) {
	for _, v := range []string{
		"", " ", "0", "120", " 120 ", "-1", "+1", "1.5", "99999999", "123456789012345678901234567890",
		"18446744073709551616", "Wed, 21 Oct 2015 07:28:00 GMT", "Wednesday, 21-Oct-15 07:28:00 GMT",
		"Wed Oct 21 07:28:00 2015", "Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 0001 00:00:00 GMT",
		"soon", "\x00", "0x10", "٣", "1\n2",
	} {
		f.Add(v, int64(1445412480))
	}
	f.Add("60", int64(-1<<62))
	f.Add("Wed, 21 Oct 2015 07:28:00 GMT", int64(1<<62))
	const century = 100 * 365 * 24 * time.Hour
	f.Fuzz(func(t *testing.T, v string, nowUnix int64) {
		now := time.Unix(nowUnix, 0)
		d, err := ParseRetryAfter(v, now)
		if err != nil {
			if !errors.Is(err, ErrBadRetryAfter) || d != 0 {
				t.Fatalf("ParseRetryAfter(%q, %v) = %v, %v, want 0, ErrBadRetryAfter", v, now, d, err)
			}
			return
		}
		if d < 0 || d > century {
			t.Fatalf("ParseRetryAfter(%q, %v) = %v, nil, want a delay in [0, a century]", v, now, d)
		}
		// Plain delay-seconds must parse exactly (clamped).
		if n, perr := strconv.ParseUint(strings.TrimSpace(v), 10, 64); perr == nil {
			want := century
			if n < uint64(century/time.Second) {
				want = time.Duration(n) * time.Second
			}
			if d != want {
				t.Fatalf("ParseRetryAfter(%q) = %v, want %v", v, d, want)
			}
		}
		if strings.TrimSpace(v) == "" && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, want 0", v, d)
		}
	})
}

// The password FuzzReadExits builds is fuzzReadExitsHead + fuzzed middle + fuzzReadExitsTail, and
// no other part of the input may contain either marker, so a marker in an error or a label can
// only come from the password: a leak of its start or its end.
var fuzzClassifyClasses = map[pool.Class]bool{
	pool.ClassOK: true, pool.ClassOrigin4xx: true, pool.ClassTimeout: true, pool.ClassConnection: true, pool.ClassBodyRead: true,
	pool.ClassTLS: true, pool.ClassRateLimited: true, pool.ClassBlocked: true, pool.ClassOrigin5xx: true, pool.ClassOriginError: true,
	pool.ClassProxyAuth: true, pool.ClassProxyRefused: true, pool.ClassProxyDNS: true, pool.ClassProxyConnect: true,
	pool.ClassUpstream: true, pool.ClassOriginDNS: true, pool.ClassCanceled: true, pool.ClassError: true,
	pool.ClassProxyDenied: true, pool.ClassProxyError: true, pool.ClassBadRequest: true,
}

var errFuzzClassifyBoom = errors.New("fuzz: connection died")

func FuzzClassify(f *testing.F) {
	type seed struct {
		code                   int
		ct, server, cfm, retry string
		body                   string
		knownLen               bool
		limit                  uint16
		chunk                  uint8
		dies                   bool
	}
	for _, s := range []seed{
		{200, "text/html", "", "", "", "<html>hello</html>", true, 0, 0, false},
		{200, "text/html", "", "", "", `<div class="g-recaptcha"></div>`, true, 0, 3, false},
		{200, "text/html", "cloudflare", "challenge", "", "<title>Just a moment...</title>", false, 16, 0, false},
		{403, "text/html", "cloudflare", "", "30", "<title>Just a moment...</title>", true, 0, 1, false},
		{403, "", "", "", "", "<H1>Access Denied</H1> Reference #18.abc", true, 8, 0, true},
		{403, "", "", "", "", "captcha-delivery.com px-captcha", false, 1, 0, true},
		{429, "", "", "", "Wed, 21 Oct 2015 07:28:00 GMT", "", true, 0, 0, false},
		{429, "", "", "", "-1", "slow down", true, 0, 0, false},
		{503, "text/html", "", "", "99999999999999999999", strings.Repeat("x", 5000), true, 0, 255, true},
		{502, "", "", "", "", "", false, 0, 0, false},
		{407, "", "", "", "", "", true, 0, 0, false},
		{500, "", "", "", "", "oops", true, 0, 0, false},
		{0, "", "", "", "", "", true, 0, 0, false},
		{-1, "text/html", "", "", "", "", false, 0, 0, true},
		{1 << 30, "", "", "", "", "", true, 0, 0, false},
	} {
		f.Add(s.code, s.ct, s.server, s.cfm, s.retry, []byte(s.body), s.knownLen, s.limit, s.chunk, s.dies)
	}
	f.Fuzz(func(t *testing.T, code int, ct, server, cfm, retry string, body []byte, knownLen bool, limit uint16, chunk uint8, dies bool) {
		if len(body) > 1<<17 {
			body = body[:1<<17] // past every peek limit and smallPage: more only costs time
		}
		var c Classifier = DefaultClassifier
		eff := DefaultPeekLimit
		if limit != 0 {
			c = &StandardClassifier{Detectors: DefaultDetectors, PeekLimit: int(limit)}
			eff = int(limit)
		}
		var r io.Reader = bytes.NewReader(body)
		if dies {
			r = io.MultiReader(r, iotest.ErrReader(errFuzzClassifyBoom))
		}
		if chunk != 0 {
			r = fuzzClassifyChunks{r, int(chunk)}
		}
		sb := &softblockBody{r: r}
		resp := classifyResp(200, "", !knownLen, "Content-Type", ct, "Server", server, "Cf-Mitigated", cfm, "Retry-After", retry)
		resp.StatusCode, resp.Body = code, sb
		if knownLen {
			resp.ContentLength = int64(len(body))
		}
		a := classifyRespAttempt(resp)
		v := c.Classify(a)

		if sb.n > eff {
			t.Fatalf("pool.Classify read %d bytes before its verdict, want at most %d", sb.n, eff)
		}
		if v.Outcome > pool.Neutral || v.Scope > pool.ScopeOrigin || !fuzzClassifyClasses[v.Class] || v.RetryAfter < 0 {
			t.Fatalf("pool.Classify(%d) = %+v: a field out of range", code, v)
		}
		if v.Soft && v.Outcome != pool.Transient {
			t.Fatalf("pool.Classify(%d) = %+v: Soft without pool.Transient", code, v)
		}
		if (v.Detector != "") != (v.Class == pool.ClassBlocked) {
			t.Fatalf("pool.Classify(%d) = %+v: Detector set iff blocked, want so", code, v)
		}
		if v.Class == pool.ClassBodyRead && !dies {
			t.Fatalf("pool.Classify(%d) = %+v for a body that did not fail", code, v)
		}
		if code == 407 && v != (pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}) {
			t.Fatalf("pool.Classify(407) = %+v, want permanent exit proxy_auth", v)
		}

		got, err := io.ReadAll(a.Response.Body)
		if !bytes.Equal(got, body) {
			t.Fatalf("caller read %q after pool.Classify, want %q", got, body)
		}
		wantErr := error(nil)
		if dies {
			wantErr = errFuzzClassifyBoom
		}
		if err != wantErr {
			t.Fatalf("caller's read ended with %v, want %v", err, wantErr)
		}
		if sb.closed {
			t.Fatalf("pool.Classify closed the body")
		}
	})
}

// fuzzClassifyChunks returns at most n bytes per Read.
type fuzzClassifyChunks struct {
	r io.Reader
	n int
}

func (c fuzzClassifyChunks) Read(p []byte) (int, error) {
	if len(p) > c.n {
		p = p[:c.n]
	}
	return c.r.Read(p)
}

package statuspage_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// FuzzNegotiation: whatever the Accept header and format parameter, the page answers 200 with
// JSON or HTML, and never panics.
func FuzzNegotiation(f *testing.F) {
	for _, s := range [][2]string{
		{"", ""}, {"application/json", ""}, {"text/html;q=0.1, application/json;q=0.2", ""},
		{"*/*", "json"}, {"application/json;q=abc", "html"}, {",,;;q=", "xml"},
	} {
		f.Add(s[0], s[1])
	}
	h, err := newFuzzHandler()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, accept, format string) {
		req := httptest.NewRequest(http.MethodGet, "/?format="+url.QueryEscape(format), nil)
		req.Header.Set("Accept", accept)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		ct := rec.Header().Get("Content-Type")
		if rec.Code != http.StatusOK || (ct != "application/json" && ct != "text/html; charset=utf-8") {
			t.Fatalf("Accept %q, format %q: %d %q", accept, format, rec.Code, ct)
		}
	})
}

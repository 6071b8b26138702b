package statuspage_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/statuspage"
)

// TestOverrides: with WithOverrides, a POSTed JSON override bans and releases a pair on the pool
// (its snapshot and the page's capacity answer follow); without it, or with a form body, a POST
// is refused; a bad override is a 400 naming what is wrong.
func TestOverrides(t *testing.T) {
	p, err := pool.New(pool.WithExits(pool.MustParseExit("10.0.0.1:80").WithLabel("a"), pool.MustParseExit("10.0.0.2:80").WithLabel("b")))
	if err != nil {
		t.Fatal(err)
	}
	if l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.test"}); err == nil {
		l.Release() // the origin is known to the pool, so its row shows
	}
	post := func(h http.Handler, ctype, body string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		r.Header.Set("Content-Type", ctype)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	off, _ := statuspage.New(p)
	if w := post(off, "application/json", `{"action":"ban","exit":"a","origin":"shop.test","for":"1h"}`); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST without WithOverrides = %d, want 405", w.Code)
	}
	h, err := statuspage.New(p, statuspage.WithOverrides(p))
	if err != nil {
		t.Fatal(err)
	}
	if w := post(h, "application/x-www-form-urlencoded", "action=ban&exit=a"); w.Code != http.StatusUnsupportedMediaType {
		t.Errorf("POST of a form = %d, want 415", w.Code)
	}
	if w := post(h, "application/json", `{"action":"ban","exit":"a","origin":"shop.test","for":"1h","reason":"console"}`); w.Code != http.StatusNoContent {
		t.Fatalf("POST ban = %d %s, want 204", w.Code, w.Body)
	}
	var banned bool
	for _, ps := range p.Snapshot().Pairs {
		banned = banned || (ps.Exit == "a" && ps.Origin == "shop.test" && ps.Breaker.Parked && ps.Breaker.LastFailure == "console")
	}
	if !banned {
		t.Errorf("after POST ban the pool's pairs are %+v, want a × shop.test parked by \"console\"", p.Snapshot().Pairs)
	}
	r := httptest.NewRequest(http.MethodGet, "/?format=json", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var table statuspage.Table
	if err := json.Unmarshal(w.Body.Bytes(), &table); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range table.Origins {
		if o.Origin == "shop.test" {
			found = o.Capacity != nil && o.Capacity.Usable == 1 && o.Capacity.Exits == 2
		}
	}
	if !found {
		t.Errorf("JSON origins %+v, want shop.test with a capacity of 1 usable exit of 2", table.Origins)
	}
	if w := post(h, "application/json", `{"action":"release","exit":"a","origin":"shop.test"}`); w.Code != http.StatusNoContent {
		t.Fatalf("POST release = %d %s, want 204", w.Code, w.Body)
	}
	if c := p.Capacity("shop.test"); c.Usable != 2 {
		t.Errorf("after POST release: %+v, want both exits usable", c)
	}
	for _, c := range []struct{ body, want string }{
		{`{"action":"ban","exit":"a","for":"soon"}`, `for "soon"`},
		{`{"action":"explode","exit":"a"}`, `action "explode"`},
		{`{"action":"ban","exit":"zz","for":"1m"}`, `no exit labelled "zz"`},
		{`{"action":"ban","exit":"a","for":"1m","extra":1}`, `unknown field`},
	} {
		if w := post(h, "application/json", c.body); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("POST %s = %d %q, want 400 containing %q", c.body, w.Code, w.Body, c.want)
		}
	}
}

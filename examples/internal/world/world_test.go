package world

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"syscall"
	"testing"
)

// TestStartExits: each exit dials its proxy as its spec says — a healthy one carries the request
// and the site learns which proxy did, a wrong password is answered 407, a dead exit's dial is
// refused — and the exits keep the specs' labels, tiers and order.
func TestStartExits(t *testing.T) {
	w := New()
	defer w.Close()
	site := w.AddSite("shop", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		via, _ := w.Registry.Lookup(r)
		io.WriteString(rw, via)
	}))
	specs := []ExitSpec{
		{Name: "ok", Tier: 1, User: "u", Pass: "right"},
		{Name: "bad", User: "u", Pass: "right", WrongPass: "wrong"},
		{Name: "dead", Dead: true},
	}
	exits, err := w.StartExits(specs...)
	if err != nil {
		t.Fatal(err)
	}
	if got := Secrets(specs); !slices.Equal(got, []string{"right", "right", "wrong"}) {
		t.Errorf("Secrets = %q, want right, right, wrong", got)
	}
	for i, e := range exits {
		if e.Label() != specs[i].Name || e.Tier() != specs[i].Tier || w.Exits[i] != e {
			t.Errorf("exit %d = %s tier %d, want %s tier %d, also in Exits", i, e.Label(), e.Tier(), specs[i].Name, specs[i].Tier)
		}
	}
	if w.SiteName(site.Key) != "shop" || w.Site("shop") != site || w.SiteName("elsewhere:1") != "elsewhere:1" {
		t.Errorf("SiteName(%q) = %q, Site(shop) = %v; want shop and the site", site.Key, w.SiteName(site.Key), w.Site("shop"))
	}
	get := func(i int) (*http.Response, error) {
		tr := w.BaseTemplate()
		tr.Proxy = http.ProxyURL(exits[i].ProxyURL())
		defer tr.CloseIdleConnections()
		return (&http.Client{Transport: tr}).Get(site.URL)
	}
	resp, err := get(0)
	if err != nil {
		t.Fatalf("through ok: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" || w.ProxyAt(exits[0].ProxyURL().Host) != "ok" {
		t.Errorf("through ok: the site saw %q, ProxyAt = %q; want ok, ok", body, w.ProxyAt(exits[0].ProxyURL().Host))
	}
	if resp, err := get(1); err != nil || resp.StatusCode != http.StatusProxyAuthRequired {
		t.Errorf("through bad: %v, %v; want a 407", resp, err)
	} else {
		resp.Body.Close()
	}
	if _, err := get(2); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("through dead: %v, want connection refused", err)
	}
}

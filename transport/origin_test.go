package transport

import (
	"net/url"
	"testing"
)

func TestOriginHost(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"http://shop.example/", "shop.example"},
		{"http://Shop.Example/Path", "shop.example"},
		{"http://SHOP.EXAMPLE:8080", "shop.example:8080"},
		{"http://shop.example:80/", "shop.example"},
		{"https://shop.example:443/x?y=z", "shop.example"},
		{"https://shop.example", "shop.example"},
		{"https://shop.example:8443", "shop.example:8443"},
		{"http://shop.example:443", "shop.example:443"},
		{"https://shop.example:80", "shop.example:80"},
		{"ws://shop.example:80", "shop.example"},
		{"wss://shop.example:443", "shop.example"},
		{"wss://shop.example:80", "shop.example:80"},
		{"ftp://shop.example:21", "shop.example:21"},
		{"http://shop.example:/", "shop.example"},
		{"http://127.0.0.1:8080/", "127.0.0.1:8080"},
		{"http://127.0.0.1:80/", "127.0.0.1"},
		{"http://[::1]:8080/", "[::1]:8080"},
		{"http://[::1]:80/", "[::1]"},
		{"http://[::1]/", "[::1]"},
		{"https://[2001:DB8::1]:443/", "[2001:db8::1]"},
		{"https://[2001:DB8::1]:8443/", "[2001:db8::1]:8443"},
		{"http://user:pass@shop.example/", "shop.example"},
	}
	for i, tt := range tests {
		u, err := url.Parse(tt.raw)
		if err != nil {
			t.Fatalf("%d: url.Parse(%q) = %v", i, tt.raw, err)
		}
		if got := OriginHost(u); got != tt.want {
			t.Errorf("%d: OriginHost(%q) = %q, want %q", i, tt.raw, got, tt.want)
		}
	}
}

func TestOriginSite(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"http://shop.example/", "shop.example"},
		{"http://www.shop.example/", "shop.example"},
		{"https://api.shop.example:8443/v1", "shop.example"}, // ports dropped
		{"http://WWW.Shop.Example", "shop.example"},
		// co.uk is a public suffix, so the registrable domain is example.co.uk: every subdomain,
		// shop. included, is one site.
		{"https://www.shop.example.co.uk/", "example.co.uk"},
		{"https://shop.example.co.uk/", "example.co.uk"},
		{"https://example.co.uk/", "example.co.uk"},
		{"https://a.b.c.example.com/", "example.com"},
		{"https://alice.github.io/", "alice.github.io"}, // a private suffix: each user is a site
		// Fallbacks to OriginHost: IP addresses, single labels, bare public suffixes.
		{"http://127.0.0.1:8080/", "127.0.0.1:8080"},
		{"http://10.0.0.1/", "10.0.0.1"},
		{"http://192.168.0.1/", "192.168.0.1"},
		{"http://[::1]:8080/", "[::1]:8080"},
		{"https://[2001:DB8::1]:443/", "[2001:db8::1]"},
		{"http://localhost:3000/", "localhost:3000"},
		{"http://LocalHost/", "localhost"},
		{"https://co.uk/", "co.uk"},
	}
	for i, tt := range tests {
		u, err := url.Parse(tt.raw)
		if err != nil {
			t.Fatalf("%d: url.Parse(%q) = %v", i, tt.raw, err)
		}
		if got := OriginSite(u); got != tt.want {
			t.Errorf("%d: OriginSite(%q) = %q, want %q", i, tt.raw, got, tt.want)
		}
	}
}

// Two IP addresses must never share a site: a registrable-domain rule applied to dotted quads
// would put 10.0.0.1 and 192.168.0.1 both under "0.1".
func TestOriginSiteKeepsIPsApart(t *testing.T) {
	a := OriginSite(&url.URL{Scheme: "http", Host: "10.0.0.1"})
	b := OriginSite(&url.URL{Scheme: "http", Host: "192.168.0.1"})
	if a == b {
		t.Errorf("OriginSite(10.0.0.1) = %q, OriginSite(192.168.0.1) = %q, want different keys", a, b)
	}
}

var originSink string

func TestOriginHostDoesNotAllocate(t *testing.T) {
	for _, raw := range []string{"https://shop.example/x", "https://shop.example:443/x", "http://shop.example:8080/", "http://[::1]:80/"} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { originSink = OriginHost(u) }); n != 0 {
			t.Errorf("OriginHost(%q) allocates %v times per call, want 0", raw, n)
		}
	}
}

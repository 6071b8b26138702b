package transport

import (
	"net/url"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// OriginFunc maps a request URL to the origin key breakers are kept per. It must be cheap and safe
// for concurrent use.
type OriginFunc func(u *url.URL) string

// OriginHost is the default OriginFunc: the URL's host and port, lower-cased, with the scheme's
// default port dropped and the scheme itself left out, so http://Shop.example and
// https://shop.example:443 are both "shop.example" and https://shop.example:8443 is
// "shop.example:8443". It does not allocate for a lower-case host.
func OriginHost(u *url.URL) string {
	h := u.Host
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		port := h[i+1:]
		if port == "" || (port == "80" && (u.Scheme == "http" || u.Scheme == "ws")) ||
			(port == "443" && (u.Scheme == "https" || u.Scheme == "wss")) {
			h = h[:i]
		}
	}
	return strings.ToLower(h)
}

// OriginSite is an OriginFunc that groups hosts by registrable domain (eTLD+1, from the public
// suffix list), because one WAF usually guards a whole site: www.shop.example, api.shop.example and
// shop.example share one breaker per exit. Ports are dropped. IP addresses and names without a
// registrable domain fall back to OriginHost.
func OriginSite(u *url.URL) string {
	host := strings.ToLower(u.Hostname())
	if site, err := publicsuffix.EffectiveTLDPlusOne(host); err == nil {
		return site
	}
	return OriginHost(u)
}

package testkit

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"

	"github.com/proxybreaker/proxybreaker/transport"
)

// TLSTemplate returns transport.DefaultBaseTemplate() trusting the certificates of the TLS servers
// among servers (started with StartTLS), and no other: plain-HTTP servers and nils are passed over,
// and without a TLS server the template trusts no certificate at all, so no test reaches past
// loopback by accident. Pass it to transport.WithBaseTemplate.
func TLSTemplate(servers ...*httptest.Server) *http.Transport {
	roots := x509.NewCertPool()
	for _, s := range servers {
		if s == nil || s.TLS == nil {
			continue
		}
		if c := s.Certificate(); c != nil {
			roots.AddCert(c)
		}
	}
	tmpl := transport.DefaultBaseTemplate()
	if tmpl.TLSClientConfig != nil {
		tmpl.TLSClientConfig = tmpl.TLSClientConfig.Clone()
	} else {
		tmpl.TLSClientConfig = &tls.Config{}
	}
	tmpl.TLSClientConfig.RootCAs = roots
	return tmpl
}

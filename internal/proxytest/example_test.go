package proxytest_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
)

// An origin tells which of two proxies carried each request, over plain HTTP and over HTTP/2
// through a CONNECT tunnel.
func Example() {
	reg := &proxytest.Registry{}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, _ := reg.Lookup(r)
		fmt.Fprintf(w, "%s via %s", r.Proto, name)
	})
	plain := httptest.NewServer(hello)
	defer plain.Close()
	secure := httptest.NewUnstartedServer(hello)
	secure.EnableHTTP2 = true
	secure.StartTLS()
	defer secure.Close()

	for _, name := range []string{"exit-a", "exit-b"} {
		p, err := proxytest.Start(proxytest.Config{Name: name, Registry: reg})
		if err != nil {
			fmt.Println(err)
			return
		}
		defer p.Close()

		roots := x509.NewCertPool()
		roots.AddCert(secure.Certificate())
		tr := &http.Transport{
			Proxy:             http.ProxyURL(p.URL()),
			TLSClientConfig:   &tls.Config{RootCAs: roots},
			ForceAttemptHTTP2: true,
		}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr}
		for _, u := range []string{plain.URL, secure.URL} {
			resp, err := client.Get(u)
			if err != nil {
				fmt.Println(err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			fmt.Println(string(body))
		}
		fmt.Printf("%s: %d forwarded, %d tunnelled\n", name, p.Requests(), p.Connects())
	}
	// Output:
	// HTTP/1.1 via exit-a
	// HTTP/2.0 via exit-a
	// exit-a: 1 forwarded, 1 tunnelled
	// HTTP/1.1 via exit-b
	// HTTP/2.0 via exit-b
	// exit-b: 1 forwarded, 1 tunnelled
}

// A proxy that demands credentials answers 407 to a client that has the wrong ones.
func ExampleConfig_auth() {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}))
	defer origin.Close()
	p, err := proxytest.Start(proxytest.Config{Name: "exit-a", User: "alice", Pass: "s3cret"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()

	for _, proxyURL := range []*url.URL{p.URL(), p.URLWithCredentials("alice", "wrong")} {
		tr := &http.Transport{Proxy: http.ProxyURL(proxyURL)}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(origin.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Printf("%s [%s]\n", resp.Status, resp.Header.Get("Proxy-Authenticate"))
	}
	fmt.Println("rejected:", p.Rejected())
	// Output:
	// 200 OK []
	// 407 Proxy Authentication Required [Basic realm="proxytest"]
	// rejected: 1
}

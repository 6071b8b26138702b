package proxytest

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/textproto"
	"strings"
)

// hopHeaders are the hop-by-hop headers of RFC 9110 section 7.6.1 (plus the legacy
// Proxy-Connection): they concern one connection, so the proxy never passes them on.
var hopHeaders = []string{
	"Connection",
	"Proxy-Connection",
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
}

// removeHopHeaders deletes the hop-by-hop headers from h, including those the Connection header
// names.
func removeHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// forward relays one absolute-form plain HTTP request to its target over a new upstream
// connection and copies the response back. It reports whether the client connection can carry
// another request.
func (p *Proxy) forward(c net.Conn, req *http.Request) (keepAlive bool) {
	from, ok := p.admit(req.Header)
	if !ok {
		p.rejectAuth(c)
		return false
	}
	if !req.URL.IsAbs() || req.URL.Scheme != "http" || req.URL.Host == "" {
		p.reject(c, http.StatusBadRequest, "want an absolute http:// request URI, got "+req.RequestURI)
		return false
	}
	port := req.URL.Port()
	if port == "" {
		port = "80"
	}
	target, ok := loopbackTarget(req.URL.Hostname(), port)
	if !ok {
		p.reject(c, http.StatusForbidden, "target "+req.URL.Host+" is not a loopback address")
		return false
	}
	if !p.pause(p.cfg.Latency) {
		return false
	}
	up, err := p.dial(target, from)
	if err != nil {
		p.reply(c, http.StatusBadGateway, "dial "+target+": "+err.Error())
		return false
	}
	defer p.untrack(up)

	clientClose := req.Close
	removeHopHeaders(req.Header)
	// One upstream connection per request: ask the origin to close it after its response.
	req.Close = true
	p.requests.Add(1)

	// Write the request while the response is read, as http.Transport does, so an origin that
	// answers before reading the whole body cannot deadlock the proxy.
	written := make(chan error, 1)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		err := req.Write(up)
		if err != nil {
			up.Close() // unblock the response read below
		}
		written <- err
	}()

	resp, err := p.readFinalResponse(c, bufio.NewReader(up), req)
	if err != nil {
		p.reply(c, http.StatusBadGateway, "read response from "+target+": "+err.Error())
		return false
	}
	defer resp.Body.Close()
	removeHopHeaders(resp.Header)
	if h := p.gw.addrHeader(); h != "" {
		resp.Header.Set(h, from.String())
	}
	resp.Proto, resp.ProtoMajor, resp.ProtoMinor = "HTTP/1.1", 1, 1
	resp.Close = clientClose
	// Response.Write closes a response of unknown length that is not chunked; mirror its rule
	// so the client connection is not reused after such a response.
	mustClose := clientClose || (resp.ContentLength == -1 && !isChunked(resp.TransferEncoding))
	if err := resp.Write(c); err != nil {
		return false
	}
	// The response is complete; an origin that never read the request body must not hold up
	// the writer goroutine.
	up.Close()
	if err := <-written; err != nil {
		// The request body was not read to its end, so the client connection is out of step.
		return false
	}
	return !mustClose
}

// readFinalResponse reads the origin's response to req, relaying interim 1xx responses (such as
// 100 Continue) to the client on the way.
func (p *Proxy) readFinalResponse(c net.Conn, br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
		removeHopHeaders(resp.Header)
		if _, err := fmt.Fprintf(c, "HTTP/1.1 %s\r\n", resp.Status); err != nil {
			return nil, err
		}
		if err := resp.Header.Write(c); err != nil {
			return nil, err
		}
		if _, err := c.Write([]byte("\r\n")); err != nil {
			return nil, err
		}
	}
}

func isChunked(te []string) bool { return len(te) > 0 && te[0] == "chunked" }

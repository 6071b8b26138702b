package proxytest

import (
	"bufio"
	"io"
	"net"
	"net/http"
)

// established is the reply that opens a tunnel.
const established = "HTTP/1.1 200 Connection established\r\n\r\n"

// tunnel answers a CONNECT request and then splices the client connection and the target
// connection until both directions have ended. br holds whatever the client sent after the
// request head; it is relayed first.
func (p *Proxy) tunnel(c net.Conn, br *bufio.Reader, req *http.Request) {
	from, ok := p.admit(req.Header)
	if !ok {
		p.rejectAuth(c)
		return
	}
	host, port, err := net.SplitHostPort(req.Host)
	if err != nil {
		p.reject(c, http.StatusBadRequest, "CONNECT wants host:port, got "+req.Host)
		return
	}
	target, ok := loopbackTarget(host, port)
	if !ok {
		p.reject(c, http.StatusForbidden, "target "+req.Host+" is not a loopback address")
		return
	}
	if p.cfg.HangAfterConnect {
		p.connects.Add(1)
		if _, err := io.WriteString(c, established); err == nil {
			drain(br)
		}
		return
	}
	if !p.pause(p.cfg.Latency) {
		return
	}
	up, err := p.dial(target, from)
	if err != nil {
		p.reply(c, http.StatusBadGateway, "dial "+target+": "+err.Error())
		return
	}
	defer p.untrack(up)
	p.connects.Add(1)
	reply := established
	if h := p.gw.addrHeader(); h != "" {
		reply = "HTTP/1.1 200 Connection established\r\n" + h + ": " + from.String() + "\r\n\r\n"
	}
	if _, err := io.WriteString(c, reply); err != nil {
		return
	}
	p.pipe(c, up, br)
}

// pipe splices the client connection c and the target connection up both ways until both
// directions have ended. br reads c, and holds whatever the client sent after its request; it is
// relayed first.
func (p *Proxy) pipe(c, up net.Conn, br *bufio.Reader) {
	done := make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(done)
		splice(up, br, c)
	}()
	splice(c, up, up)
	<-done
}

// splice copies src to dst. When src ends cleanly it half-closes dst, so the peer sees the end
// of the stream while the other direction goes on; when either side fails it closes both dst
// and srcConn, which ends the other direction too.
func splice(dst net.Conn, src io.Reader, srcConn net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		srcConn.Close()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	dst.Close()
}

package proxytest

import (
	"bufio"
	"crypto/subtle"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"syscall"
)

// SOCKS5 wire values (RFC 1928, RFC 1929).
const (
	socksVersion = 0x05

	socksMethodNone         = 0x00
	socksMethodUserPass     = 0x02
	socksMethodNoAcceptable = 0xFF

	socksUserPassVersion = 0x01
	socksUserPassOK      = 0x00
	socksUserPassFailure = 0x01

	socksCmdConnect = 0x01

	socksAddrIPv4   = 0x01
	socksAddrDomain = 0x03
	socksAddrIPv6   = 0x04

	socksSucceeded        = 0x00
	socksGeneralFailure   = 0x01
	socksNotAllowed       = 0x02
	socksConnRefused      = 0x05
	socksCmdNotSupported  = 0x07
	socksAddrNotSupported = 0x08
)

// errSOCKSRequest marks a request the proxy read but will not serve; the reply code says why.
var errSOCKSRequest = errors.New("proxytest: socks request refused")

// serveSOCKS handles one SOCKS5 client connection: the method negotiation, the RFC 1929
// username/password check when Config.User is set, one CONNECT request, and then the tunnel.
// Every refusal is counted in Rejected and answered with the reply RFC 1928 names before the
// connection is closed.
func (p *Proxy) serveSOCKS(c net.Conn) {
	br := bufio.NewReader(c)
	method, err := p.socksNegotiate(br)
	if err != nil {
		if !isHangup(err) {
			p.rejected.Add(1)
		}
		return
	}
	if _, err := c.Write([]byte{socksVersion, method}); err != nil || method == socksMethodNoAcceptable {
		return
	}
	if method == socksMethodUserPass {
		ok, err := p.socksCheckUserPass(br)
		if err != nil {
			if !isHangup(err) {
				p.rejected.Add(1)
			}
			return
		}
		status := byte(socksUserPassOK)
		if !ok {
			p.rejected.Add(1)
			status = socksUserPassFailure
		}
		// RFC 1929: on failure the server must close the connection after the reply.
		if _, err := c.Write([]byte{socksUserPassVersion, status}); err != nil || !ok {
			return
		}
	}

	target, code, err := readSOCKSRequest(br)
	if err != nil {
		if errors.Is(err, errSOCKSRequest) {
			p.rejected.Add(1)
			socksReply(c, code, nil)
		} else if !isHangup(err) {
			p.rejected.Add(1)
		}
		return
	}
	if p.cfg.HangAfterConnect {
		p.connects.Add(1)
		if socksReply(c, socksSucceeded, nil) == nil {
			drain(br)
		}
		return
	}
	if !p.pause(p.cfg.Latency) {
		return
	}
	up, err := p.dial(target, netip.Addr{})
	if err != nil {
		code := byte(socksGeneralFailure)
		if errors.Is(err, syscall.ECONNREFUSED) {
			code = socksConnRefused
		}
		socksReply(c, code, nil)
		return
	}
	defer p.untrack(up)
	p.connects.Add(1)
	if socksReply(c, socksSucceeded, up.LocalAddr()) != nil {
		return
	}
	p.pipe(c, up, br)
}

// socksNegotiate reads the client's greeting and returns the method the proxy picks: no
// authentication for an open proxy, username/password for one with Config.User, or "no acceptable
// methods" when the client does not offer that one. Only a malformed greeting is an error.
func (p *Proxy) socksNegotiate(r io.Reader) (method byte, err error) {
	var head [2]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, err
	}
	if head[0] != socksVersion || head[1] == 0 {
		return 0, errors.New("proxytest: not a SOCKS5 greeting")
	}
	offered := make([]byte, head[1])
	if _, err := io.ReadFull(r, offered); err != nil {
		return 0, err
	}
	want := byte(socksMethodNone)
	if p.cfg.User != "" {
		want = socksMethodUserPass
	}
	for _, m := range offered {
		if m == want {
			return want, nil
		}
	}
	p.rejected.Add(1)
	return socksMethodNoAcceptable, nil
}

// socksCheckUserPass reads an RFC 1929 request and reports whether it carries Config.User and
// Config.Pass.
func (p *Proxy) socksCheckUserPass(r io.Reader) (bool, error) {
	var b [1]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return false, err
	}
	if b[0] != socksUserPassVersion {
		return false, errors.New("proxytest: bad username/password version " + strconv.Itoa(int(b[0])))
	}
	user, err := readSOCKSString(r)
	if err != nil {
		return false, err
	}
	pass, err := readSOCKSString(r)
	if err != nil {
		return false, err
	}
	// Both comparisons always run, so the time taken says nothing about which one failed.
	userOK := subtle.ConstantTimeCompare(user, []byte(p.cfg.User))
	passOK := subtle.ConstantTimeCompare(pass, []byte(p.cfg.Pass))
	return userOK&passOK == 1, nil
}

// readSOCKSString reads a length-prefixed field: one length byte, then that many bytes.
func readSOCKSString(r io.Reader) ([]byte, error) {
	var n [1]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	s := make([]byte, n[0])
	_, err := io.ReadFull(r, s)
	return s, err
}

// readSOCKSRequest reads a SOCKS5 request and returns the loopback address to dial. A request the
// proxy will not serve returns an error matching errSOCKSRequest and the reply code to send:
// command not supported for anything but CONNECT, address type not supported for an unknown
// type, not allowed for a target off the loopback interface (any name but "localhost", which is
// taken as 127.0.0.1 without asking a resolver). Other errors mean the request could not be read.
func readSOCKSRequest(r io.Reader) (target string, code byte, err error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return "", 0, err
	}
	if head[0] != socksVersion {
		return "", 0, errors.New("proxytest: bad SOCKS request version " + strconv.Itoa(int(head[0])))
	}
	var host string
	switch head[3] {
	case socksAddrIPv4:
		var a [4]byte
		if _, err := io.ReadFull(r, a[:]); err != nil {
			return "", 0, err
		}
		host = netip.AddrFrom4(a).String()
	case socksAddrIPv6:
		var a [16]byte
		if _, err := io.ReadFull(r, a[:]); err != nil {
			return "", 0, err
		}
		host = netip.AddrFrom16(a).String()
	case socksAddrDomain:
		name, err := readSOCKSString(r)
		if err != nil {
			return "", 0, err
		}
		host = string(name)
	default:
		// The address's length is unknown, so the rest of the request cannot be read.
		return "", socksAddrNotSupported, errSOCKSRequest
	}
	var port [2]byte
	if _, err := io.ReadFull(r, port[:]); err != nil {
		return "", 0, err
	}
	if head[1] != socksCmdConnect {
		return "", socksCmdNotSupported, errSOCKSRequest
	}
	target, ok := loopbackTarget(host, strconv.Itoa(int(port[0])<<8|int(port[1])))
	if !ok {
		return "", socksNotAllowed, errSOCKSRequest
	}
	return target, 0, nil
}

// socksReply writes a reply with code and the bound address bound (0.0.0.0:0 when nil or not
// TCP).
func socksReply(w io.Writer, code byte, bound net.Addr) error {
	b := []byte{socksVersion, code, 0x00}
	ap := netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	if ta, ok := bound.(*net.TCPAddr); ok {
		ap = ta.AddrPort()
	}
	if ip := ap.Addr().Unmap(); ip.Is4() {
		a := ip.As4()
		b = append(append(b, socksAddrIPv4), a[:]...)
	} else {
		a := ip.As16()
		b = append(append(b, socksAddrIPv6), a[:]...)
	}
	b = append(b, byte(ap.Port()>>8), byte(ap.Port()))
	_, err := w.Write(b)
	return err
}

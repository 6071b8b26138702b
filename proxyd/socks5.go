package proxyd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"
)

// SOCKS5 (RFC 1928) on the daemon's port, told from HTTP by its first byte (5): the CONNECT
// command to an IPv4, IPv6 or domain target, with no authentication or RFC 1929
// username/password. The username carries the options as in HTTP (Options); when the listener
// demands credentials, only username/password is accepted. A CONNECT goes through the same tunnel
// path as an HTTP CONNECT (tunnel.go); its reply can carry no Proxy-Status, so a refusal is one of
// the RFC's codes and the reason goes to the log.

// SOCKS5 protocol values, shared by the server (here) and the client of SOCKS5 exits (upstream.go).
const (
	socksVersion  = 0x05
	socksNoAuth   = 0x00
	socksUserPass = 0x02
	socksNoMethod = 0xFF
	socksConnect  = 0x01
	socksIPv4     = 0x01
	socksDomain   = 0x03
	socksIPv6     = 0x04

	socksSucceeded          = 0x00
	socksGeneralFailure     = 0x01
	socksNotAllowed         = 0x02
	socksNetUnreachable     = 0x03
	socksHostUnreachable    = 0x04
	socksConnRefused        = 0x05
	socksTTLExpired         = 0x06
	socksCommandUnsupported = 0x07
	socksAddressUnsupported = 0x08
)

// errSOCKS is matched by every malformed SOCKS5 message.
var errSOCKS = errors.New("proxyd: malformed SOCKS5 message")

func socksErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errSOCKS}, args...)...)
}

// readSOCKSGreeting reads the client's greeting (VER NMETHODS METHODS) and returns its methods.
func readSOCKSGreeting(r io.Reader) ([]byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	if h[0] != socksVersion {
		return nil, socksErr("version %d", h[0])
	}
	if h[1] == 0 {
		return nil, socksErr("no methods offered")
	}
	methods := make([]byte, h[1])
	if _, err := io.ReadFull(r, methods); err != nil {
		return nil, err
	}
	return methods, nil
}

// readSOCKSUserPass reads an RFC 1929 username/password request.
func readSOCKSUserPass(r io.Reader) (user, pass string, err error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return "", "", err
	}
	if h[0] != 0x01 {
		return "", "", socksErr("username/password version %d", h[0])
	}
	u := make([]byte, h[1])
	if _, err := io.ReadFull(r, u); err != nil {
		return "", "", err
	}
	var pl [1]byte
	if _, err := io.ReadFull(r, pl[:]); err != nil {
		return "", "", err
	}
	p := make([]byte, pl[0])
	if _, err := io.ReadFull(r, p); err != nil {
		return "", "", err
	}
	return string(u), string(p), nil
}

// socksRequest is a client's request: its command and target (host:port).
type socksRequest struct {
	cmd    byte
	target string
	host   string
}

// readSOCKSRequest reads a request (VER CMD RSV ATYP DST.ADDR DST.PORT). An unknown address type
// is an error whose reply is socksAddressUnsupported.
func readSOCKSRequest(r io.Reader) (socksRequest, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return socksRequest{}, err
	}
	if h[0] != socksVersion {
		return socksRequest{}, socksErr("request version %d", h[0])
	}
	var host string
	switch h[3] {
	case socksIPv4:
		var a [4]byte
		if _, err := io.ReadFull(r, a[:]); err != nil {
			return socksRequest{}, err
		}
		host = netip.AddrFrom4(a).String()
	case socksIPv6:
		var a [16]byte
		if _, err := io.ReadFull(r, a[:]); err != nil {
			return socksRequest{}, err
		}
		host = netip.AddrFrom16(a).String()
	case socksDomain:
		var l [1]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return socksRequest{}, err
		}
		name := make([]byte, l[0])
		if _, err := io.ReadFull(r, name); err != nil {
			return socksRequest{}, err
		}
		if err := checkTargetName(string(name)); err != nil {
			return socksRequest{}, err
		}
		host = string(name)
	default:
		return socksRequest{}, &socksAddrTypeError{h[3]}
	}
	var p [2]byte
	if _, err := io.ReadFull(r, p[:]); err != nil {
		return socksRequest{}, err
	}
	port := int(p[0])<<8 | int(p[1])
	if port == 0 {
		return socksRequest{}, socksErr("port 0")
	}
	return socksRequest{cmd: h[1], host: host, target: net.JoinHostPort(host, strconv.Itoa(port))}, nil
}

// socksAddrTypeError is a request with an address type the RFC does not define.
type socksAddrTypeError struct{ atyp byte }

func (e *socksAddrTypeError) Error() string {
	return fmt.Sprintf("proxyd: SOCKS5 address type %d", e.atyp)
}

// checkTargetName validates a target host name: 1 to 253 bytes of letters, digits, '-', '.' and
// '_' (no spaces, controls or ':', which would make another target of host:port).
func checkTargetName(name string) error {
	if name == "" || len(name) > 253 {
		return socksErr("target name of %d bytes", len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
			return socksErr("target name: byte %d is not a letter, digit, '-', '.' or '_'", i+1)
		}
	}
	return nil
}

// socksReply writes a reply with code rep and the bound address 0.0.0.0:0.
func socksReply(w io.Writer, rep byte) error {
	_, err := w.Write([]byte{socksVersion, rep, 0, socksIPv4, 0, 0, 0, 0, 0, 0})
	return err
}

// serveSOCKS serves one SOCKS5 client connection whose first byte br has not consumed yet.
func (l *listener) serveSOCKS(c net.Conn, br *bufio.Reader) {
	s := l.s
	c.SetDeadline(time.Now().Add(s.cfg.HeaderTimeout))
	methods, err := readSOCKSGreeting(br)
	if err != nil {
		s.cfg.Logger.Debug("proxyd: socks5 greeting", "client", c.RemoteAddr().String(), "err", err)
		return
	}
	userPass := slices.Contains(methods, socksUserPass)
	switch {
	case !s.creds.empty() && !userPass, !userPass && !slices.Contains(methods, socksNoAuth):
		c.Write([]byte{socksVersion, socksNoMethod})
		return
	case userPass:
		c.Write([]byte{socksVersion, socksUserPass})
	default:
		c.Write([]byte{socksVersion, socksNoAuth})
	}
	var opts Options
	if userPass {
		user, pass, err := readSOCKSUserPass(br)
		if err != nil {
			return
		}
		account, text := SplitUsername(user)
		if !s.creds.empty() && !s.creds.check(account, pass) {
			c.Write([]byte{0x01, 0x01})
			s.cfg.Logger.Info("proxyd: socks5 credentials refused", "client", c.RemoteAddr().String())
			return
		}
		if opts, err = ParseOptions(text); err != nil {
			c.Write([]byte{0x01, 0x01})
			s.cfg.Logger.Info("proxyd: socks5 options refused", "client", c.RemoteAddr().String(), "err", err)
			return
		}
		c.Write([]byte{0x01, 0x00})
	}
	if opts, err = l.profile.Merge(opts); err != nil {
		socksReply(c, socksNotAllowed)
		return
	}
	req, err := readSOCKSRequest(br)
	var ate *socksAddrTypeError
	switch {
	case errors.As(err, &ate):
		socksReply(c, socksAddressUnsupported)
		return
	case err != nil:
		socksReply(c, socksGeneralFailure)
		return
	case req.cmd != socksConnect:
		socksReply(c, socksCommandUnsupported)
		return
	}
	c.SetDeadline(time.Time{})
	tn, ref := s.openTunnel(req.host, req.target, opts)
	if ref != nil {
		socksReply(c, ref.socks)
		s.cfg.Logger.Info("proxyd: socks5 connect refused", "client", c.RemoteAddr().String(), "target", req.target, "reason", ref.reason)
		return
	}
	if err := socksReply(c, socksSucceeded); err != nil {
		tn.abandon()
		return
	}
	tn.run(c, br)
}

package proxyd

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// A tunnel (an HTTP CONNECT or a SOCKS5 CONNECT) is one exit for its life: the pick is made once,
// when it opens, for the origin its target names. The daemon cannot read what the tunnel carries
// (TLS, end to end), so it judges by what it sees of the bytes (docs/judgement.md):
//
//   - the setup through the exit: a failed dial, TLS to the proxy, the proxy's CONNECT reply or
//     SOCKS5 reply code, a handshake past HandshakeTimeout (judgeDial, upstream.go);
//   - the first bytes back from the origin, after the client's first bytes: a success, reported
//     with the time to that first byte as the attempt's latency — or, when the client opened with
//     a TLS ClientHello and the answer is a TLS alert record, a TLS failure;
//   - the origin closing or resetting the tunnel after the client's first bytes and before any
//     byte back: a connection failure (ClassConnection, connection-level);
//   - no byte back within FirstByteTimeout of the client's first bytes: a stall, judged a timeout;
//     the tunnel is closed so that the client's retry goes elsewhere;
//   - a client that leaves first, or a tunnel the daemon closes, says nothing of the exit; nor does
//     a tunnel the client keeps silent past FirstByteTimeout, whose lease is given back then;
//   - a tunnel silent both ways for TunnelIdleTimeout is closed (idleCheck), and says nothing of
//     the exit either: the client went quiet.
//
// Bytes each way are counted on the exit's socket: those up to the verdict go with the report
// (Lease.ReportTrafficAt), the rest to the exit's and origin's totals when the tunnel ends
// (Pool.AddTraffic). When the pair (or the exit) opens while a tunnel is live — by the daemon's
// judgement of another request or a client's report — the tunnel is closed (tunnelSet.kill), so
// the client's next connection is picked anew.

// tunnel is one open tunnel.
type tunnel struct {
	s      *Server
	exit   *pool.Exit
	origin string
	up     *countConn
	setup  time.Duration // from the pick to the tunnel's opening

	mu         sync.Mutex
	lease      pool.Lease // reported once (judged), under mu
	judged     bool
	client     net.Conn // set by run
	firstSent  time.Time
	firstByte  byte // the client's first byte (0x16: a TLS handshake record)
	clientGone bool
	killed     bool
	stall      clock.Timer
	idle       clock.Timer  // the client's silence since the opening (idleRelease)
	quiet      clock.Timer  // the silence both ways (idleCheck)
	reported   pool.Traffic // the bytes that went with the report

	lastActive atomic.Int64 // the pool clock's UnixNano at the last byte either way
}

// tlsHandshakeRecord and tlsAlertRecord are TLS record content types (RFC 8446 §5.1).
const (
	tlsHandshakeRecord = 0x16
	tlsAlertRecord     = 0x15
)

// openTunnel picks an exit for target (host:port) with opts and sets up the tunnel through it.
// A refusal says why there is none, already judged and reported on the lease when an exit was
// tried. A gateway's CONNECT reply that names an egress IP the pool says the origin has banned
// (egress-header=, pool/gateway_egress.go) retires the session; the tunnel is closed unused and
// dialled again through a fresh one, pool.MaxEgressRedials times at most, as the transport does.
func (s *Server) openTunnel(host, target string, opts Options) (*tunnel, *refusal) {
	if !s.cfg.AllowPrivate {
		if err := checkHost(host); err != nil {
			return nil, forbiddenRefusal(err)
		}
	}
	origin := s.cfg.OriginKey(&url.URL{Scheme: schemeForPort(target), Host: target})
	for tries := 1; ; tries++ {
		t, ref, rejected := s.tryTunnel(origin, target, opts)
		if rejected == nil {
			return t, ref
		}
		if redial, err := transport.EgressRedial(rejected, tries); !redial {
			return nil, egressRefusal(target, err)
		}
	}
}

// tryTunnel is one pick and setup of openTunnel; rejected is the egress rejection of a tunnel
// that opened through a banned egress IP (closed, reported neutral).
func (s *Server) tryTunnel(origin, target string, opts Options) (t *tunnel, ref *refusal, rejected error) {
	ctx := s.ctx
	// A pick that would wait for a rate-limit token waits at most the handshake timeout: past it
	// the pool refuses at once (a *pool.ThrottledError), and the client hears 503 with Retry-After.
	pctx, cancel := context.WithTimeout(ctx, s.cfg.HandshakeTimeout)
	lease, err := s.pool.Pick(pctx, opts.request(origin))
	cancel()
	if err != nil {
		return nil, pickRefusal(err), nil
	}
	e := lease.Exit()
	at := lease.Info().At
	s.sessions.note(opts.Session, origin, e.Label())
	d := s.dialThrough(ctx, e, target)
	now := s.pool.Clock().Now()
	if d.err == nil {
		d.err = transport.RejectBannedEgress(&lease, d.reply)
		if d.err != nil {
			d.conn.Close()
		}
	}
	if d.err != nil {
		if errors.Is(d.err, ErrForbiddenTarget) {
			lease.Release()
			return nil, forbiddenRefusal(d.err), nil
		}
		v := s.judgeDial(ctx, e, origin, d.err)
		var tr pool.Traffic
		if d.conn != nil {
			tr = d.conn.traffic()
		}
		lease.ReportTrafficAt(now, v, tr)
		if d.received == http.StatusOK { // opened, then rejected for its egress IP
			return nil, nil, d.err
		}
		s.metrics.tunnelFailed()
		return nil, &refusal{
			status: failureStatus(v.Class), errType: errorType(v.Class), exit: e.Label(), received: d.received,
			reason: "tunnel to " + target + " via " + e.Label() + ": " + verdictDetails(v), socks: socksCodeOf(v),
		}, nil
	}
	t = &tunnel{s: s, exit: e, origin: origin, up: d.conn, lease: lease, setup: now.Sub(at)}
	s.tunnels.add(t) // from here a pair that opens closes it, even before the client hears of it
	return t, nil, nil
}

// egressRefusal answers a tunnel whose gateway kept assigning egress IPs the origin has banned
// (err a *pool.EgressBannedError, naming the gateway by label, never a session): 502.
func egressRefusal(target string, err error) *refusal {
	r := &refusal{status: http.StatusBadGateway, errType: "destination_unavailable", reason: "tunnel to " + target + ": " + err.Error(), socks: socksHostUnreachable}
	var eb *pool.EgressBannedError
	if errors.As(err, &eb) {
		r.exit = eb.Gateway
	}
	return r
}

// forbiddenRefusal answers a relay to a forbidden address: 403, nothing sent.
func forbiddenRefusal(err error) *refusal {
	return &refusal{status: http.StatusForbidden, errType: "destination_ip_prohibited", reason: err.Error(), socks: socksNotAllowed}
}

// socksCodeOf returns the SOCKS5 reply code for a failed tunnel's verdict.
func socksCodeOf(v pool.Verdict) byte {
	switch v.Class {
	case pool.ClassUpstream:
		return socksHostUnreachable
	case pool.ClassTimeout:
		return socksTTLExpired
	case pool.ClassProxyDenied, pool.ClassBadRequest:
		return socksNotAllowed
	case pool.ClassOriginDNS:
		return socksHostUnreachable
	}
	return socksGeneralFailure
}

// schemeForPort returns the scheme a target's port suggests, for its origin key: "http" for 80,
// else "https" (whose default port 443 the origin key drops).
func schemeForPort(target string) string {
	if _, port, err := net.SplitHostPort(target); err == nil && port == "80" {
		return "http"
	}
	return "https"
}

// label is the tunnel's exit label.
func (t *tunnel) label() string { return t.exit.Label() }

// proxyStatus is the member a CONNECT reply carries.
func (t *tunnel) proxyStatus(received int) proxyStatus {
	return proxyStatus{exit: t.label(), received: received, details: "tunnel open; judged by its first bytes"}
}

// abandon gives the tunnel up before it carried anything: the client could not be told it opened.
func (t *tunnel) abandon() {
	t.s.tunnels.remove(t)
	t.up.Close()
	t.mu.Lock()
	if !t.judged {
		t.judged = true
		t.lease.ReportTrafficAt(t.s.pool.Clock().Now(), pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled}, t.up.traffic())
	}
	t.mu.Unlock()
}

// tunnelBuffer is the size of each direction's copy buffer: a TLS record (16 KiB) at a time. An idle
// tunnel holds both, blocked in Read: 32 KiB a tunnel.
const tunnelBuffer = 16 << 10

// run relays between client (whose unread bytes br holds) and the exit until both directions end,
// judging the tunnel on the way.
func (t *tunnel) run(client net.Conn, br *bufio.Reader) {
	t.mu.Lock()
	t.client = client
	killed := t.killed
	t.mu.Unlock()
	if killed {
		client.Close() // its pair opened between the setup and now
	}
	t.mu.Lock()
	if !t.judged && t.firstSent.IsZero() {
		t.idle = t.s.pool.Clock().AfterFunc(t.s.cfg.FirstByteTimeout, t.idleRelease)
	}
	t.active()
	t.quiet = t.s.pool.Clock().AfterFunc(t.s.cfg.TunnelIdleTimeout, t.idleCheck)
	t.mu.Unlock()
	t.s.metrics.tunnelOpened()
	defer t.s.metrics.tunnelClosed()
	defer t.s.tunnels.remove(t)

	done := make(chan struct{})
	go func() {
		defer close(done)
		t.fromClient(br)
	}()
	t.fromExit(client)
	<-done
	client.Close()
	t.up.Close()
	t.mu.Lock()
	t.quiet.Stop()
	t.mu.Unlock()
	t.finish()
}

// fromClient copies the client's bytes to the exit; at the client's end of stream it half-closes
// the exit's side (the answer may still come), on an error it closes the tunnel.
func (t *tunnel) fromClient(br *bufio.Reader) {
	buf := make([]byte, tunnelBuffer)
	for {
		n, err := br.Read(buf)
		if n > 0 {
			t.active()
			t.clientSent(buf[0])
			if _, werr := t.up.Write(buf[:n]); werr != nil {
				t.closeBoth()
				return
			}
		}
		if errors.Is(err, io.EOF) {
			t.up.closeWrite()
			return
		}
		if err != nil {
			t.mu.Lock()
			t.clientGone = true
			t.mu.Unlock()
			t.closeBoth()
			return
		}
	}
}

// fromExit copies the exit's bytes to the client, judging the tunnel by the first of them.
func (t *tunnel) fromExit(client net.Conn) {
	buf := make([]byte, tunnelBuffer)
	first := true
	for {
		n, err := t.up.Read(buf)
		if n > 0 {
			t.active()
			if first {
				first = false
				t.answered(buf[0])
			}
			if _, werr := client.Write(buf[:n]); werr != nil {
				t.mu.Lock()
				t.clientGone = true
				t.mu.Unlock()
				t.closeBoth()
				return
			}
		}
		if err != nil {
			if first {
				t.endedSilent(err)
			}
			// The origin's side ended: what it sent is written, and the tunnel is done (a client
			// that half-closed first has had its answer; one that did not would only wait).
			t.closeBoth()
			return
		}
	}
}

// clientSent notes the client's bytes: the first arm the stall timer.
func (t *tunnel) clientSent(b byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.firstSent.IsZero() || t.judged {
		return
	}
	t.firstSent, t.firstByte = t.s.pool.Clock().Now(), b
	if t.idle != nil {
		t.idle.Stop()
	}
	t.stall = t.s.pool.Clock().AfterFunc(t.s.cfg.FirstByteTimeout, t.stalled)
}

// idleRelease gives the lease back, unjudged, when the client has sent nothing for
// FirstByteTimeout since the tunnel opened (a browser's preconnect, say): the lease would hold the
// exit's place in the pool — a probe slot, its count of leases out — for as long as the client
// keeps the tunnel idle. The tunnel stays open; what it carries later is not judged.
func (t *tunnel) idleRelease() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.judged || !t.firstSent.IsZero() {
		return
	}
	t.judgeLocked(pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled})
}

// active notes a byte either way, now.
func (t *tunnel) active() { t.lastActive.Store(t.s.pool.Clock().Now().UnixNano()) }

// idleCheck is the quiet timer: a tunnel silent both ways for TunnelIdleTimeout is closed, its
// lease (if still unjudged) given back neutral; one that carried bytes since is checked again when
// its silence would reach the timeout.
func (t *tunnel) idleCheck() {
	now := t.s.pool.Clock().Now()
	quiet := now.Sub(time.Unix(0, t.lastActive.Load()))
	t.mu.Lock()
	if quiet < t.s.cfg.TunnelIdleTimeout {
		t.quiet = t.s.pool.Clock().AfterFunc(t.s.cfg.TunnelIdleTimeout-quiet, t.idleCheck)
		t.mu.Unlock()
		return
	}
	if !t.judged {
		t.judgeLocked(pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled})
	}
	t.killed = true
	t.mu.Unlock()
	t.s.metrics.tunnelIdled()
	t.closeBoth()
}

// answered judges the tunnel by the first byte the exit relayed.
func (t *tunnel) answered(b byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.judged {
		return
	}
	v := pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}
	if b == tlsAlertRecord && t.firstByte == tlsHandshakeRecord {
		v = pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTLS, ConnLevel: true}
	}
	t.judgeLocked(v)
}

// endedSilent judges a tunnel the exit's side ended before any byte came back.
func (t *tunnel) endedSilent(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.judged:
	case t.killed || t.clientGone:
		t.judgeLocked(pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled})
	case t.firstSent.IsZero():
		// Closed before the client said anything: an idle tunnel the proxy timed out, say.
		t.judgeLocked(pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassConnection})
	case isTimeoutErr(err):
		t.judgeLocked(pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true})
	default:
		t.judgeLocked(pool.Verdict{Outcome: pool.Transient, Class: pool.ClassConnection, ConnLevel: true})
	}
}

// stalled is the stall timer: no byte came back in time.
func (t *tunnel) stalled() {
	t.mu.Lock()
	if t.judged {
		t.mu.Unlock()
		return
	}
	t.judgeLocked(pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true})
	t.killed = true
	t.mu.Unlock()
	t.s.metrics.tunnelStalled()
	t.closeBoth()
}

// judgeLocked reports v on the lease with the bytes so far. A success is reported at the instant
// that makes its latency the tunnel's setup plus the time from the client's first bytes to the
// first byte back, not the time the client kept the tunnel idle before it wrote (a browser's
// preconnect).
func (t *tunnel) judgeLocked(v pool.Verdict) {
	t.judged = true
	if t.stall != nil {
		t.stall.Stop()
	}
	if t.idle != nil {
		t.idle.Stop()
	}
	now := t.s.pool.Clock().Now()
	at := now
	if v.Outcome == pool.Success && !t.firstSent.IsZero() {
		if lat := t.setup + now.Sub(t.firstSent); lat >= 0 {
			if ideal := t.lease.Info().At.Add(lat); ideal.Before(now) {
				at = ideal
			}
		}
	}
	t.reported = t.up.traffic()
	rep := t.lease.ReportTrafficAt(at, v, t.reported)
	t.s.metrics.tunnelJudged(rep.Verdict)
}

// kill closes the tunnel from outside: its pair or exit opened, or the daemon shuts down. An
// unjudged tunnel says nothing of the exit.
func (t *tunnel) kill() {
	t.mu.Lock()
	t.killed = true
	t.mu.Unlock()
	t.closeBoth()
}

func (t *tunnel) closeBoth() {
	t.up.Close()
	t.mu.Lock()
	c := t.client
	t.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// finish judges a tunnel that ended unjudged and counts the bytes after the verdict.
func (t *tunnel) finish() {
	t.mu.Lock()
	if !t.judged {
		t.judgeLocked(pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled})
	}
	rest := t.up.traffic()
	rest.Sent -= t.reported.Sent
	rest.Received -= t.reported.Received
	t.mu.Unlock()
	if rest != (pool.Traffic{}) {
		t.s.pool.AddTraffic(t.exit, t.origin, rest)
	}
}

// connectReply writes a CONNECT's 200 with the tunnel's Proxy-Status.
func connectReply(w io.Writer, ps proxyStatus) error {
	_, err := io.WriteString(w, "HTTP/1.1 200 Connection established\r\nProxy-Status: "+ps.String()+"\r\n\r\n")
	return err
}

// connectRefusal writes a CONNECT's refusal: status, Proxy-Status, the reason as the body; the
// connection is closed after it.
func connectRefusal(w io.Writer, r *refusal) error {
	body := "proxybreakerd: " + r.reason + "\n"
	head := "HTTP/1.1 " + strconv.Itoa(r.status) + " " + http.StatusText(r.status) + "\r\n" +
		"Proxy-Status: " + r.proxyStatus().String() + "\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n"
	if r.retryAfter > 0 {
		head += "Retry-After: " + strconv.Itoa(int((r.retryAfter+time.Second-1)/time.Second)) + "\r\n"
	}
	if r.status == http.StatusProxyAuthRequired {
		head += "Proxy-Authenticate: Basic realm=\"proxybreakerd\"\r\n"
	}
	_, err := io.WriteString(w, head+"\r\n"+body)
	return err
}

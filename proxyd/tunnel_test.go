package proxyd

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/internal/servertest"
	"github.com/proxybreaker/proxybreaker/pool"
)

// rawOrigin is a TCP origin on 127.0.0.1 that serves each connection with serve.
func rawOrigin(t *testing.T, serve func(c *net.TCPConn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				go func() { <-done; c.Close() }()
				serve(c.(*net.TCPConn))
			}()
		}
	}()
	return ln.Addr().String()
}

// echo answers every byte with itself.
func echo(c *net.TCPConn) { io.Copy(c, c) }

// resetAfterFirstBytes reads the client's first bytes and resets the connection.
func resetAfterFirstBytes(c *net.TCPConn) {
	c.Read(make([]byte, 64))
	c.SetLinger(0)
	c.Close()
}

// silent reads and never answers.
func silent(c *net.TCPConn) { io.Copy(io.Discard, c) }

// tlsAlert answers the first bytes with a fatal handshake_failure alert record and closes.
func tlsAlert(c *net.TCPConn) {
	c.Read(make([]byte, 64))
	c.Write([]byte{tlsAlertRecord, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28})
}

// connect opens a CONNECT tunnel to target on a raw connection to the daemon and returns the
// reply and the connection.
func (w *world) connect(target string) (*http.Response, net.Conn, *bufio.Reader) {
	w.t.Helper()
	c := w.dialDaemon()
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		w.t.Fatalf("CONNECT %s: %v", target, err)
	}
	return resp, c, br
}

// closedByDaemon reports whether reading c ends (EOF or reset) within a bound: the daemon closed
// the tunnel.
func closedByDaemon(c net.Conn, br *bufio.Reader) bool {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, br)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// TestTunnelJudgement: each thing a tunnel shows of its origin becomes its verdict — bytes back
// (success), a reset after the client's first bytes (connection), a TLS alert answering a
// ClientHello (tls), no byte back within FirstByteTimeout (timeout, and the tunnel is closed).
func TestTunnelJudgement(t *testing.T) {
	w := newWorld(t, Config{AllowPrivate: true, FirstByteTimeout: 300 * time.Millisecond}, "", exitSpec{label: "a"})
	for _, c := range []struct {
		name          string
		serve         func(*net.TCPConn)
		first         []byte
		outcome, cls  string
		daemonCloses  bool
		stalledBefore int64
	}{
		{"echo", echo, []byte("ping"), "success", "ok", false, 0},
		{"reset", resetAfterFirstBytes, []byte("ping"), "transient", "connection", true, 0},
		{"alert", tlsAlert, []byte{tlsHandshakeRecord, 3, 1, 0, 5, 1, 2, 3, 4, 5}, "transient", "tls", true, 0},
		{"stall", silent, []byte("ping"), "transient", "timeout", true, 1},
	} {
		target := rawOrigin(t, c.serve)
		resp, conn, br := w.connect(target)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: CONNECT = %d, want 200", c.name, resp.StatusCode)
		}
		conn.Write(c.first)
		if c.daemonCloses {
			if !closedByDaemon(conn, br) {
				t.Errorf("%s: the tunnel stayed open, want it closed", c.name)
			}
		} else {
			got := make([]byte, len(c.first))
			if _, err := io.ReadFull(br, got); err != nil || string(got) != string(c.first) {
				t.Errorf("%s: echo = %q, %v", c.name, got, err)
			}
			conn.Close()
		}
		waitFor(t, c.name+" judged", func() bool { return w.s.verdictCount(c.outcome, c.cls) == 1 })
		if got := w.s.Stats().TunnelsStalled; got != c.stalledBefore {
			t.Errorf("%s: tunnels stalled = %d, want %d", c.name, got, c.stalledBefore)
		}
	}
	waitFor(t, "the tunnels to end", func() bool { return w.s.tunnels.len() == 0 })
}

// TestTunnelSetupFailures: an exit that refuses the CONNECT (407: its credentials) or cannot be
// dialled is judged by the transport's classifier and parked for every origin; the client gets a
// 502 whose Proxy-Status names the exit and the error.
func TestTunnelSetupFailures(t *testing.T) {
	closed, err := proxytest.ClosedAddr()
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, Config{AllowPrivate: true}, "", exitSpec{label: "auth", cfg: proxytest.Config{User: "u", Pass: "p"}, wrongPass: true})
	if err := w.s.pool.Add(pool.MustParseExit("http://" + closed).WithLabel("down")); err != nil {
		t.Fatal(err)
	}
	target := rawOrigin(t, echo)
	for _, c := range []struct {
		exit, want string
	}{
		{"auth", `proxybreakerd; error=http_request_error; next-hop="auth"; received-status=407; details="tunnel to ` + target + ` via auth: permanent exit proxy_auth"`},
		{"down", `proxybreakerd; error=connection_refused; next-hop="down"; details="tunnel to ` + target + ` via down: permanent exit proxy_refused"`},
	} {
		c2 := w.dialDaemon()
		io.WriteString(c2, "CONNECT "+target+" HTTP/1.1\r\nProxy-Authorization: Basic "+basic("me-exit-"+c.exit, "")+"\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c2), &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 502 || resp.Header.Get("Proxy-Status") != c.want {
			t.Errorf("CONNECT via %s = %d %q, want 502 %q", c.exit, resp.StatusCode, resp.Header.Get("Proxy-Status"), c.want)
		}
	}
	for _, e := range w.s.pool.Snapshot().Exits {
		if e.Breaker.State != breaker.Open {
			t.Errorf("exit %s is %v after its failed CONNECT, want OPEN (parked)", e.Exit, e.Breaker.State)
		}
	}
}

// TestTunnelsCloseWhenTheirPairOpens: a live tunnel is closed when its (exit, origin) pair opens —
// here by an operator's ban — so that the client's next connection is picked anew; a tunnel to
// another origin through the same exit stays open.
func TestTunnelsCloseWhenTheirPairOpens(t *testing.T) {
	w := newWorld(t, Config{AllowPrivate: true}, "", exitSpec{label: "a"})
	banned, kept := rawOrigin(t, echo), rawOrigin(t, echo)
	var conns []net.Conn
	var readers []*bufio.Reader
	for _, target := range []string{banned, kept} {
		_, c, br := w.connect(target)
		c.Write([]byte("hi"))
		if _, err := io.ReadFull(br, make([]byte, 2)); err != nil {
			t.Fatal(err)
		}
		conns, readers = append(conns, c), append(readers, br)
	}
	if err := w.s.pool.Ban("a", w.s.OriginOf(banned), time.Minute, "test"); err != nil {
		t.Fatal(err)
	}
	if !closedByDaemon(conns[0], readers[0]) {
		t.Fatal("the tunnel on the banned pair stayed open")
	}
	if got := w.s.Stats().TunnelsKilled; got != 1 {
		t.Errorf("tunnels killed = %d, want 1", got)
	}
	conns[1].Write([]byte("still"))
	if b := make([]byte, 5); func() error { _, err := io.ReadFull(readers[1], b); return err }() != nil || string(b) != "still" {
		t.Errorf("the tunnel to the other origin died, want it open")
	}
	// The exit's own breaker opening closes its tunnels on every origin.
	if err := w.s.pool.Ban("a", "", time.Minute, "test"); err != nil {
		t.Fatal(err)
	}
	if !closedByDaemon(conns[1], readers[1]) {
		t.Error("the tunnel on the banned exit stayed open")
	}
	if !strings.Contains(w.s.pool.Snapshot().Exits[0].Breaker.LastFailure, "test") {
		t.Errorf("exit ban reason = %q", w.s.pool.Snapshot().Exits[0].Breaker.LastFailure)
	}
}

// TestSOCKS5AddressTypes: a raw SOCKS5 client reaches an echo origin by IPv4 address, by name and
// by IPv6 address (RFC 1928 address types 1, 3 and 4) through the same tunnel path; an unknown
// address type and a command other than CONNECT get their reply codes.
func TestSOCKS5AddressTypes(t *testing.T) {
	w := newWorld(t, Config{AllowPrivate: true}, "", exitSpec{label: "a"})
	v4 := rawOrigin(t, echo)
	_, port4, _ := net.SplitHostPort(v4)
	p4, _ := strconv.Atoi(port4)
	reqs := map[string][]byte{
		"ipv4":   append([]byte{5, 1, 0, socksIPv4, 127, 0, 0, 1}, byte(p4>>8), byte(p4)),
		"domain": append(append([]byte{5, 1, 0, socksDomain, 9}, "localhost"...), byte(p4>>8), byte(p4)),
	}
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { defer c.Close(); echo(c.(*net.TCPConn)) }()
			}
		}()
		t.Cleanup(func() { ln.Close() })
		p6 := ln.Addr().(*net.TCPAddr).Port
		reqs["ipv6"] = append(append([]byte{5, 1, 0, socksIPv6}, net.IPv6loopback...), byte(p6>>8), byte(p6))
	} else if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf("no IPv6 loopback: %v", err)
	} else {
		t.Logf("no IPv6 loopback (%v): IPv6 target not tried", err)
	}
	for name, req := range reqs {
		c := w.dialDaemon()
		c.Write([]byte{5, 1, socksNoAuth})
		c.Write(req)
		reply := make([]byte, 2+10)
		if _, err := io.ReadFull(c, reply); err != nil || reply[1] != socksNoAuth || reply[3] != socksSucceeded {
			t.Errorf("%s: reply %v, %v; want method 0 and success", name, reply, err)
			continue
		}
		c.Write([]byte("echo-" + name))
		got := make([]byte, len("echo-"+name))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != "echo-"+name {
			t.Errorf("%s: echo %q, %v", name, got, err)
		}
	}
	for _, c := range []struct {
		name string
		req  []byte
		code byte
	}{
		{"address type 9", []byte{5, 1, 0, 9, 1, 2, 3, 4, 0, 80}, socksAddressUnsupported},
		{"BIND", []byte{5, 2, 0, socksIPv4, 127, 0, 0, 1, 0, 80}, socksCommandUnsupported},
	} {
		conn := w.dialDaemon()
		conn.Write([]byte{5, 1, socksNoAuth})
		conn.Write(c.req)
		reply := make([]byte, 12)
		if _, err := io.ReadFull(conn, reply); err != nil || reply[3] != c.code {
			t.Errorf("%s: reply %v, %v; want code %d", c.name, reply, err, c.code)
		}
	}
}

// TestRefusedConnectRoutedAroundForThatSiteOnly: tinyproxy refuses CONNECTs to one host name
// (403 Filtered: proxy_denied, the pair's): the client meets the refusal at most once, later
// tunnels to that site leave through the other exit, and tinyproxy keeps carrying tunnels to
// another site.
func TestRefusedConnectRoutedAroundForThatSiteOnly(t *testing.T) {
	w := newWorld(t, Config{AllowPrivate: true}, "", exitSpec{label: "b"})
	tiny := servertest.Tinyproxy(t, servertest.TinyproxyConfig{Filter: []string{"localhost"}})
	if err := w.s.pool.Add(pool.MustParseExit(tiny.String()).WithLabel("tiny")); err != nil {
		t.Fatal(err)
	}
	target := rawOrigin(t, echo)
	_, port, _ := net.SplitHostPort(target)
	hop := func(resp *http.Response) string {
		ps := resp.Header.Get("Proxy-Status")
		_, after, _ := strings.Cut(ps, `next-hop="`)
		name, _, _ := strings.Cut(after, `"`)
		return name
	}
	refused := 0
	for range 12 {
		resp, c, _ := w.connect("localhost:" + port)
		switch {
		case resp.StatusCode == 502 && hop(resp) == "tiny" && strings.Contains(resp.Header.Get("Proxy-Status"), "permanent pair proxy_denied"):
			refused++
		case resp.StatusCode != 200 || hop(resp) != "b":
			t.Errorf("CONNECT localhost: %d via %q (%s)", resp.StatusCode, hop(resp), resp.Header.Get("Proxy-Status"))
		}
		c.Close()
	}
	if refused != 1 {
		// Two exits, twelve picks: tinyproxy is tried at least once, and once is enough.
		t.Errorf("the client met tinyproxy's refusal %d times, want once", refused)
	}
	seen := map[string]int{}
	for range 20 {
		resp, c, br := w.connect(target)
		if resp.StatusCode == 200 {
			c.Write([]byte("x"))
			io.ReadFull(br, make([]byte, 1))
		}
		seen[hop(resp)]++
		c.Close()
	}
	if seen["tiny"] == 0 || seen["b"] == 0 {
		t.Errorf("tunnels to another site went through %v, want both exits", seen)
	}
}

// TestTunnelStress: many tunnels at once through three exits while an operator bans and releases
// one exit's pair over and over (closing its tunnels): under the race detector nothing races, every
// tunnel ends, and the daemon's counts come back to zero.
func TestTunnelStress(t *testing.T) {
	w := newWorld(t, Config{AllowPrivate: true}, "", exitSpec{label: "a"}, exitSpec{label: "b"}, exitSpec{label: "c"})
	target := rawOrigin(t, echo)
	origin := w.s.OriginOf(target)
	stop := make(chan struct{})
	var flips sync.WaitGroup
	flips.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			w.s.pool.Ban("a", origin, time.Minute, "stress")
			w.s.pool.Release("a", origin)
		}
	})
	var wg sync.WaitGroup
	var ok atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 25 {
				c, err := net.Dial("tcp", w.addr)
				if err != nil {
					t.Error(err)
					return
				}
				io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\n\r\n")
				br := bufio.NewReader(c)
				resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
				if err == nil && resp.StatusCode == 200 {
					c.Write([]byte("abc"))
					if b := make([]byte, 3); func() error { _, err := io.ReadFull(br, b); return err }() == nil {
						ok.Add(1)
					}
				}
				c.Close()
			}
		})
	}
	wg.Wait()
	close(stop)
	flips.Wait()
	if ok.Load() < 100 {
		t.Errorf("%d of 200 tunnels echoed, want most", ok.Load())
	}
	waitFor(t, "every tunnel and connection to end", func() bool {
		return w.s.tunnels.len() == 0 && w.s.conns.Load() == 0 && w.s.Stats().TunnelsOpen == 0
	})
}

// TestIdleTunnelGivesItsLeaseBack: a tunnel whose client sends nothing past FirstByteTimeout gives
// its lease back unjudged (the exit's count of attempts in flight returns to zero) and stays open:
// the client's later bytes still go through.
func TestIdleTunnelGivesItsLeaseBack(t *testing.T) {
	w := newWorld(t, Config{AllowPrivate: true, FirstByteTimeout: 200 * time.Millisecond}, "", exitSpec{label: "a"})
	_, c, br := w.connect(rawOrigin(t, echo))
	if n := w.s.pool.Snapshot().Exits[0].InFlight; n != 1 {
		t.Fatalf("in flight with the tunnel open = %d, want 1", n)
	}
	waitFor(t, "the lease to come back", func() bool { return w.s.pool.Snapshot().Exits[0].InFlight == 0 })
	if n := w.s.verdictCount("neutral", "canceled"); n != 1 {
		t.Errorf("neutral verdicts = %d, want 1", n)
	}
	c.Write([]byte("late"))
	b := make([]byte, 4)
	if _, err := io.ReadFull(br, b); err != nil || string(b) != "late" {
		t.Errorf("the idle tunnel's later bytes: %q %v", b, err)
	}
	if n := w.s.verdictCount("success", "ok") + w.s.verdictCount("transient", "timeout"); n != 0 {
		t.Errorf("the released tunnel was judged again (%d verdicts)", n)
	}
}

// A tunnel whose dial failed because the daemon ran out of descriptors (or buffers) blames
// neither the exit nor the pair, however the error is wrapped: judged as theirs it would open the
// pair and close every live tunnel on it.
func TestDialExhaustionBlamesNoOne(t *testing.T) {
	w := newWorld(t, Config{AllowPrivate: true}, "", exitSpec{label: "a"})
	e := w.s.pool.Snapshot().Exits[0]
	exit := w.s.pool.Exit(e.Exit)
	if exit == nil {
		t.Fatalf("no exit labelled %q", e.Exit)
	}
	want := pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassNotAttempted}
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS} {
		dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", errno)}
		for name, err := range map[string]error{"proxy dial": dial, "direct dial": &originFault{err: dial}} {
			if got := w.s.judgeDial(context.Background(), exit, "shop.test", err); got != want {
				t.Errorf("%v (%s): judgeDial = %+v, want %+v", errno, name, got, want)
			}
		}
	}
}

// TestQuietTunnelIsClosed: a tunnel that carried nothing either way for TunnelIdleTimeout is
// closed by the daemon. One already judged by its first bytes keeps its success; one the client
// never used gives its lease back neutral. Neither counts against the exit.
func TestQuietTunnelIsClosed(t *testing.T) {
	w := newWorld(t, Config{AllowPrivate: true, FirstByteTimeout: time.Minute, TunnelIdleTimeout: 100 * time.Millisecond}, "", exitSpec{label: "a"})
	origin := rawOrigin(t, echo)

	_, used, ubr := w.connect(origin)
	used.Write([]byte("ping"))
	b := make([]byte, 4)
	if _, err := io.ReadFull(ubr, b); err != nil || string(b) != "ping" {
		t.Fatalf("echo through the tunnel: %q %v", b, err)
	}
	_, unused, nbr := w.connect(origin)
	for _, c := range []net.Conn{used, unused} {
		c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound on a failing test, not a measure
	}
	for name, br := range map[string]*bufio.Reader{"used": ubr, "unused": nbr} {
		if n, err := br.Read(b); err == nil || isTimeoutErr(err) {
			t.Errorf("%s tunnel: read %d bytes, %v after the idle timeout, want the tunnel closed", name, n, err)
		}
	}
	waitFor(t, "both tunnels to end", func() bool { return w.s.tunnels.len() == 0 && w.s.Stats().TunnelsOpen == 0 })
	if n := w.s.Stats().TunnelsIdled; n != 2 {
		t.Errorf("tunnels idled = %d, want 2", n)
	}
	if n := w.s.verdictCount("success", "ok"); n != 1 {
		t.Errorf("successes = %d, want 1 (the used tunnel's)", n)
	}
	if n := w.s.verdictCount("neutral", "canceled"); n != 1 {
		t.Errorf("neutral verdicts = %d, want 1 (the unused tunnel's)", n)
	}
	if n := w.s.verdictCount("transient", "timeout") + w.s.verdictCount("transient", "connection"); n != 0 {
		t.Errorf("%d failures judged against the exit, want 0", n)
	}
	if e := w.s.pool.Snapshot().Exits[0]; e.InFlight != 0 {
		t.Errorf("in flight after both closed = %d, want 0", e.InFlight)
	}
}

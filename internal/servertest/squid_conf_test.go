package servertest

import (
	"bytes"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

func TestSquidConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  SquidConfig
		want string // "" for valid
	}{
		{SquidConfig{}, ""},
		{SquidConfig{Hosts: map[string]string{"site.test": "127.0.0.1", "a-1.b": "127.0.0.2", "v6.test": "::1"}, Deny: []string{"denied.test"}}, ""},
		{SquidConfig{Hosts: map[string]string{"site.test": "192.0.2.1"}}, "Hosts"},
		{SquidConfig{Hosts: map[string]string{"site.test": "localhost"}}, "Hosts"},
		{SquidConfig{Hosts: map[string]string{"site test": "127.0.0.1"}}, "Hosts name"},
		{SquidConfig{Hosts: map[string]string{"-site.test": "127.0.0.1"}}, "Hosts name"},
		{SquidConfig{Hosts: map[string]string{"": "127.0.0.1"}}, "Hosts name"},
		{SquidConfig{Deny: []string{"denied.test\nhttp_access allow all"}}, "Deny"},
		{SquidConfig{Deny: []string{"all;"}}, "Deny"},
	}
	for i, tt := range tests {
		err := tt.cfg.validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("step %d: validate(%+v) = %v, want nil", i, tt.cfg, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("step %d: validate(%+v) = %v, want an error about %s", i, tt.cfg, err, tt.want)
		}
	}
}

func TestSquidConfigConf(t *testing.T) {
	cfg := SquidConfig{Hosts: map[string]string{"b.test": "127.0.0.2", "a.test": "127.0.0.1"}, Deny: []string{"x.test", "y.test"}}
	got := cfg.conf(squidSetup{port: 3128, dir: "/tmp/sq", nameserver: "127.53.1.2", user: "proxy"})
	want := `# written by servertest.StartSquid
http_port 127.0.0.1:3128
visible_hostname servertest-squid
pid_filename /tmp/sq/squid.pid
cache_log /tmp/sq/cache.log
access_log stdio:/tmp/sq/access.log
cache_store_log none
coredump_dir /tmp/sq
netdb_filename none
pinger_enable off
icp_port 0
htcp_port 0
cache deny all
cache_mem 8 MB
max_filedescriptors 1024
shutdown_lifetime 0 seconds
hosts_file /tmp/sq/hosts
dns_nameservers 127.53.1.2
dns_timeout 5 seconds
connect_timeout 10 seconds
acl servertest_denied dstdomain x.test y.test
http_access deny servertest_denied
http_access allow localhost
http_access deny all
cache_effective_user proxy
`
	if got != want {
		t.Errorf("conf() =\n%s\nwant\n%s", got, want)
	}
	if got := (SquidConfig{}).conf(squidSetup{port: 3128, dir: "/tmp/sq", nameserver: "127.53.1.2"}); strings.Contains(got, "acl ") ||
		strings.Contains(got, "cache_effective_user") || !strings.Contains(got, "\nhttp_access allow localhost\nhttp_access deny all\n") {
		t.Errorf("zero conf() =\n%s\nwant no ACL of its own, no user, localhost allowed and the rest denied", got)
	}
	if got, want := cfg.hosts(), "# written by servertest.StartSquid\n127.0.0.1 a.test\n127.0.0.2 b.test\n"; got != want {
		t.Errorf("hosts() = %q, want %q", got, want)
	}
}

// query builds a standard DNS query for name (type A, class IN), with an EDNS OPT record when
// edns, as squid sends them.
func query(id uint16, name string, edns bool) []byte {
	q := []byte{byte(id >> 8), byte(id), 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	if edns {
		q[11] = 1
	}
	for _, l := range strings.Split(name, ".") {
		q = append(q, byte(len(l)))
		q = append(q, l...)
	}
	q = append(q, 0, 0, 1, 0, 1)
	if edns {
		q = append(q, 0, 0, 41, 16, 0, 0, 0, 0, 0, 0, 0)
	}
	return q
}

func TestNXDomain(t *testing.T) {
	for _, edns := range []bool{false, true} {
		q := query(0xbeef, "nosuch.invalid", edns)
		got := nxdomain(q)
		want := append([]byte{0xbe, 0xef, 0x81, 0x83, 0, 1, 0, 0, 0, 0, 0, 0}, query(0, "nosuch.invalid", false)[12:]...)
		if !bytes.Equal(got, want) {
			t.Errorf("nxdomain(query, edns %t) =\n% x\nwant\n% x", edns, got, want)
		}
	}
	bad := [][]byte{
		nil,
		make([]byte, 11),
		func() []byte { q := query(1, "a.b", false); q[2] |= 0x80; return q }(), // a response
		func() []byte { q := query(1, "a.b", false); q[2] |= 0x10; return q }(), // another opcode
		func() []byte { q := query(1, "a.b", false); q[5] = 2; return q }(),     // two questions
		func() []byte { q := query(1, "a.b", false); q[4] = 1; return q }(),     // 257 questions
		func() []byte { q := query(1, "a.b", false); return q[:len(q)-1] }(),    // truncated QCLASS
		func() []byte { q := query(1, "a.b", false); q[12] = 0xc0; return q }(), // a pointer
		func() []byte { q := query(1, "a.b", false); q[12] = 60; return q }(),   // a label past the end
		query(1, strings.Repeat(strings.Repeat("a", 63)+".", 4)+"b", false),     // a name over 255 bytes
	}
	for i, q := range bad {
		if got := nxdomain(q); got != nil {
			t.Errorf("step %d: nxdomain(% x) = % x, want nil", i, q, got)
		}
	}
}

func FuzzNXDomain(f *testing.F) {
	f.Add(query(7, "nosuch.invalid", true))
	f.Add(query(7, "a", false))
	f.Add([]byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0})
	f.Fuzz(func(t *testing.T, q []byte) {
		r := nxdomain(q)
		if r == nil {
			return
		}
		if len(r) > len(q) || len(r) < 17 || r[0] != q[0] || r[1] != q[1] || r[2]&0x80 == 0 || r[3]&0x0f != 3 ||
			!bytes.Equal(r[4:6], []byte{0, 1}) || !bytes.Equal(r[6:12], make([]byte, 6)) || !bytes.Equal(r[12:], q[12:len(r)]) {
			t.Fatalf("nxdomain(% x) = % x: not the NXDOMAIN answer to its question", q, r)
		}
	})
}

// TestNXResolverAnswers sends a real query over UDP to a running resolver. It needs port 53 of a
// loopback address: without the permission it is skipped, or fails in CI, as StartSquid does.
func TestNXResolverAnswers(t *testing.T) {
	r, err := startNXResolver()
	if err != nil {
		if errors.Is(err, os.ErrPermission) && !inCI() {
			t.Skipf("%v", err)
		}
		t.Fatal(err)
	}
	defer r.Close()
	c, err := net.Dial("udp4", net.JoinHostPort(r.IP(), "53"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(query(0x1234, "nosuch.invalid", true)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	if want := nxdomain(query(0x1234, "nosuch.invalid", true)); !bytes.Equal(buf[:n], want) {
		t.Errorf("answer = % x, want % x", buf[:n], want)
	}
	if ip := net.ParseIP(r.IP()); ip == nil || !ip.IsLoopback() {
		t.Errorf("IP() = %q, want a loopback address", r.IP())
	}
}

package servertest_test

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/servertest"
)

// redisDo sends one inline command to addr and returns the first line of the answer.
func redisDo(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// TestRedisKillAndRestart: a server answers on 127.0.0.1, is gone once killed, and comes back on
// the same address, empty.
func TestRedisKillAndRestart(t *testing.T) {
	t.Parallel()
	s := servertest.StartRedis(t)
	addr := s.Addr()
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("Addr() = %s, want 127.0.0.1:PORT", addr)
	}
	for i, step := range []struct{ cmd, want string }{
		{"SET k v", "+OK"},
		{"GET k", "$1"},
		{"CONFIG GET save", "*2"},
	} {
		if got, err := redisDo(addr, step.cmd); err != nil || got != step.want {
			t.Fatalf("step %d: %s = %q, %v; want %q", i, step.cmd, got, err, step.want)
		}
	}
	s.Kill()
	if got, err := redisDo(addr, "PING"); err == nil {
		t.Fatalf("PING after Kill = %q, want a connection error", got)
	}
	s.Kill() // killing a stopped server does nothing
	s.Restart()
	if s.Addr() != addr {
		t.Errorf("Addr() after Restart = %s, want %s", s.Addr(), addr)
	}
	if got, err := redisDo(addr, "GET k"); err != nil || got != "$-1" {
		t.Errorf("GET k after Restart = %q, %v; want $-1 (a restarted server is empty)", got, err)
	}
}

// TestRedisFreezeAndThaw: a frozen server accepts nothing and answers nothing; thawed, it answers.
func TestRedisFreezeAndThaw(t *testing.T) {
	t.Parallel()
	s := servertest.StartRedis(t)
	s.Freeze()
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err == nil {
		defer c.Close()
		c.SetDeadline(time.Now().Add(300 * time.Millisecond))
		c.Write([]byte("PING\r\n"))
		if line, err := bufio.NewReader(c).ReadString('\n'); err == nil {
			t.Fatalf("a frozen server answered %q", line)
		}
	}
	s.Thaw()
	if got, err := redisDo(s.Addr(), "PING"); err != nil || got != "+PONG" {
		t.Errorf("PING after Thaw = %q, %v", got, err)
	}
}

func TestRedisInstancesAreIndependent(t *testing.T) {
	t.Parallel()
	a, b := servertest.Redis(t), servertest.Redis(t)
	if a == b {
		t.Fatalf("two servers share %s", a)
	}
	if _, err := redisDo(a, "SET only-a 1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := redisDo(b, "EXISTS only-a"); got != ":0" {
		t.Errorf("EXISTS only-a on the other server = %q, want :0", got)
	}
}

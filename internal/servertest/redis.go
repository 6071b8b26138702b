package servertest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RedisStartTimeout bounds how long StartRedis waits for a started redis-server to answer PING.
const RedisStartTimeout = 5 * time.Second

// redisAttempts is how many ports StartRedis tries: a port found free can be taken by another
// process before redis-server binds it, and redis-server then exits at once.
const redisAttempts = 3

// redisPaths are tried, in order, after a PATH lookup.
var redisPaths = []string{"/usr/bin/redis-server", "/usr/sbin/redis-server", "/usr/local/bin/redis-server"}

// RedisServer is a running redis-server on 127.0.0.1 that a test can kill, as a crash would, and
// start again on the same port. It keeps nothing on disk: a restarted server is empty, as one that
// lost its memory in an outage.
type RedisServer struct {
	t    testing.TB
	bin  string
	dir  string
	addr string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan error
}

// Redis starts a redis-server and returns its address, 127.0.0.1:PORT. It is shorthand for
// StartRedis(t).Addr().
func Redis(t testing.TB) string {
	t.Helper()
	return StartRedis(t).Addr()
}

// StartRedis starts a redis-server on 127.0.0.1 with a port chosen for it and a config, log and
// working directory in t.TempDir(), and waits until it answers PING. It is killed, and waited for,
// when the test ends; its log is copied to the test output if the test failed.
//
// When no redis-server binary is found the test is skipped, or fails when the CI environment
// variable is true (`make test` installs the Debian package redis-server).
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	bin, err := findRedis()
	if err != nil {
		if inCI() {
			t.Fatalf("servertest: %v; CI must install redis-server, never skip", err)
		}
		t.Skipf("servertest: %v; `make test` installs it", err)
	}
	s := &RedisServer{t: t, bin: bin, dir: t.TempDir()}
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err == nil {
			s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			err = s.start()
		}
		if err == nil {
			break
		}
		if !errors.Is(err, errExited) || attempt == redisAttempts {
			t.Fatalf("servertest: redis-server, attempt %d: %v", attempt, err)
		}
	}
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			t.Logf("servertest: redis-server on %s:\n%s", s.addr, tailFiles(s.dir, "redis.out", "redis.log"))
		}
	})
	return s
}

// Addr returns 127.0.0.1:PORT, the same after a Restart.
func (s *RedisServer) Addr() string { return s.addr }

// Kill kills redis-server with SIGKILL and waits for it. Killing a stopped server does nothing.
func (s *RedisServer) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Freeze stops redis-server with SIGSTOP: its connections stay open and nothing is answered, as
// with a hung server or a network that drops packets. Thaw resumes it. Freezing a stopped server
// does nothing.
func (s *RedisServer) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen redis-server with SIGCONT.
func (s *RedisServer) Thaw() { s.signal(syscall.SIGCONT) }

func (s *RedisServer) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.cmd.Process.Signal(sig)
	}
}

// Restart starts a killed redis-server again, empty, on the same port and waits until it answers
// PING; it fails the test if it cannot.
func (s *RedisServer) Restart() {
	s.t.Helper()
	s.Kill()
	if err := s.start(); err != nil {
		s.t.Fatalf("servertest: redis-server restart: %v", err)
	}
}

// redisConf renders the redis.conf for a server on 127.0.0.1:port with its files in dir: loopback
// only, no snapshots and no append-only file (a restart starts empty), one database.
func redisConf(port int, dir string) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("# written by servertest.StartRedis")
	line("port %d", port)
	line("bind 127.0.0.1")
	line("protected-mode yes")
	line("daemonize no")
	line(`dir "%s"`, dir)
	line(`logfile "%s"`, filepath.Join(dir, "redis.log"))
	line(`save ""`)
	line("appendonly no")
	line("databases 1")
	return b.String()
}

// start runs redis-server on s.addr and waits until it answers PING.
func (s *RedisServer) start() error {
	_, portStr, _ := net.SplitHostPort(s.addr)
	port, _ := strconv.Atoi(portStr)
	confPath := filepath.Join(s.dir, "redis.conf")
	if err := os.WriteFile(confPath, []byte(redisConf(port, s.dir)), 0o600); err != nil {
		return err
	}
	out, err := os.OpenFile(filepath.Join(s.dir, "redis.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()

	cmd := exec.Command(s.bin, confPath)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	if err := waitPong(s.addr, exited); err != nil {
		if !errors.Is(err, errExited) {
			cmd.Process.Kill()
			<-exited
		}
		return fmt.Errorf("%s: %w\n%s", s.addr, err, tailFiles(s.dir, "redis.out", "redis.log"))
	}
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return nil
}

// waitPong polls addr until it answers PING with PONG, the process exits (reported on exited), or
// RedisStartTimeout passes. A server still loading answers -LOADING, which is not ready.
func waitPong(addr string, exited <-chan error) error {
	deadline := time.NewTimer(RedisStartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if pingRedis(addr) == nil {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("%w (%v)", errExited, err)
		case <-deadline.C:
			return fmt.Errorf("not answering PING after %v", RedisStartTimeout)
		case <-tick.C:
		}
	}
}

// pingRedis sends one inline PING to addr and checks the answer.
func pingRedis(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// findRedis returns the path of the redis-server binary.
func findRedis() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	for _, p := range redisPaths {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("redis-server not found on PATH or at %s", strings.Join(redisPaths, ", "))
}

// tailFiles returns the end of each named file in dir, for error messages.
func tailFiles(dir string, names ...string) string {
	const max = 4 << 10
	var b strings.Builder
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || len(data) == 0 {
			continue
		}
		if len(data) > max {
			data = data[len(data)-max:]
		}
		fmt.Fprintf(&b, "--- %s\n%s", name, data)
	}
	return b.String()
}

package servertest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TinyproxyStartTimeout bounds how long Tinyproxy waits for a started tinyproxy to accept TCP
// connections.
const TinyproxyStartTimeout = 5 * time.Second

// tinyproxyAttempts is how many ports Tinyproxy tries: a port found free can be taken by another
// process before tinyproxy binds it, and tinyproxy then exits at once.
const tinyproxyAttempts = 3

// tinyproxyPaths are tried, in order, after a PATH lookup; /usr/sbin is often not on a user's PATH.
var tinyproxyPaths = []string{"/usr/bin/tinyproxy", "/usr/sbin/tinyproxy"}

// Tinyproxy starts a tinyproxy configured by cfg on 127.0.0.1 and returns its URL,
// http://127.0.0.1:PORT, with cfg.User and cfg.Pass as user information when cfg.User is set.
// It is shorthand for StartTinyproxy(t, cfg).URL().
//
// The proxy is killed, and waited for, when the test ends; its config and log live in
// t.TempDir(), and the log is copied to the test output if the test fails.
//
// When no tinyproxy binary is found the test is skipped, or fails when the CI environment
// variable is true. An invalid cfg, or a tinyproxy that does not accept connections within
// TinyproxyStartTimeout, fails the test.
func Tinyproxy(t testing.TB, cfg TinyproxyConfig) *url.URL {
	t.Helper()
	return StartTinyproxy(t, cfg).URL()
}

// TinyproxyServer is a running tinyproxy that a test can kill, as a crash would, and start again
// on the same port.
type TinyproxyServer struct {
	t    testing.TB
	bin  string
	dir  string
	cfg  TinyproxyConfig
	addr string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan error
}

// StartTinyproxy is like Tinyproxy but returns the server itself.
func StartTinyproxy(t testing.TB, cfg TinyproxyConfig) *TinyproxyServer {
	t.Helper()
	bin, err := findTinyproxy()
	if err != nil {
		if inCI() {
			t.Fatalf("servertest: %v; CI must install tinyproxy, never skip", err)
		}
		t.Skipf("servertest: %v; `make test` installs it", err)
	}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	s := &TinyproxyServer{t: t, bin: bin, dir: t.TempDir(), cfg: cfg}
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err == nil {
			s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			err = s.start()
		}
		if err == nil {
			break
		}
		if !errors.Is(err, errExited) || attempt == tinyproxyAttempts {
			t.Fatalf("servertest: tinyproxy, attempt %d: %v", attempt, err)
		}
	}
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			t.Logf("servertest: tinyproxy on %s:\n%s", s.addr, tail(s.dir))
		}
	})
	return s
}

// URL returns http://127.0.0.1:PORT, with the configured credentials as user information.
func (s *TinyproxyServer) URL() *url.URL {
	u := &url.URL{Scheme: "http", Host: s.addr}
	if s.cfg.User != "" {
		u.User = url.UserPassword(s.cfg.User, s.cfg.Pass)
	}
	return u
}

// Kill kills tinyproxy with SIGKILL and waits for it. Killing a stopped server does nothing.
func (s *TinyproxyServer) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Restart starts a killed tinyproxy again on the same port and waits until it accepts
// connections; it fails the test if it cannot.
func (s *TinyproxyServer) Restart() {
	s.t.Helper()
	s.Kill()
	if err := s.start(); err != nil {
		s.t.Fatalf("servertest: tinyproxy restart: %v", err)
	}
}

// errExited marks a tinyproxy that exited before it accepted a connection, most likely because
// its port was taken meanwhile.
var errExited = errors.New("exited before accepting connections")

// start runs tinyproxy on s.addr and waits until it accepts connections.
func (s *TinyproxyServer) start() error {
	_, portStr, _ := net.SplitHostPort(s.addr)
	port, _ := strconv.Atoi(portStr)
	confPath := filepath.Join(s.dir, "tinyproxy.conf")
	if err := os.WriteFile(confPath, []byte(s.cfg.conf(port, s.dir)), 0o600); err != nil {
		return err
	}
	// An *os.File as stdout and stderr lets the child write directly: exec starts no copying
	// goroutines, and nothing waits on a pipe.
	out, err := os.OpenFile(filepath.Join(s.dir, "tinyproxy.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()

	cmd := exec.Command(s.bin, "-d", "-c", confPath)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	if err := waitAccepting(s.addr, exited); err != nil {
		if !errors.Is(err, errExited) {
			cmd.Process.Kill()
			<-exited
		}
		return fmt.Errorf("%s: %w\n%s", s.addr, err, tail(s.dir))
	}
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return nil
}

// waitAccepting polls addr until it accepts a TCP connection, the process exits (reported on
// exited), or TinyproxyStartTimeout passes.
func waitAccepting(addr string, exited <-chan error) error {
	deadline := time.NewTimer(TinyproxyStartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("%w (%v)", errExited, err)
		case <-deadline.C:
			return fmt.Errorf("not accepting connections after %v", TinyproxyStartTimeout)
		case <-tick.C:
		}
	}
}

// findTinyproxy returns the path of the tinyproxy binary.
func findTinyproxy() (string, error) {
	if p, err := exec.LookPath("tinyproxy"); err == nil {
		return p, nil
	}
	for _, p := range tinyproxyPaths {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("tinyproxy not found on PATH or at %s", strings.Join(tinyproxyPaths, ", "))
}

// inCI reports whether the CI environment variable is set to a true value, as CI services do.
func inCI() bool {
	ci, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && ci
}

// freePort returns a 127.0.0.1 port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the end of tinyproxy's output and log in dir, for error messages.
func tail(dir string) string {
	const max = 4 << 10
	var b strings.Builder
	for _, name := range []string{"tinyproxy.out", "tinyproxy.log"} {
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

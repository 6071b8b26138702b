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
// The proxy is killed, and waited for, when the test ends; its config and log live in
// t.TempDir(), and the log is copied to the test output if the test fails.
//
// When no tinyproxy binary is found the test is skipped, or fails when the CI environment
// variable is true. An invalid cfg, or a tinyproxy that does not accept connections within
// TinyproxyStartTimeout, fails the test.
func Tinyproxy(t testing.TB, cfg TinyproxyConfig) *url.URL {
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
	dir := t.TempDir()
	var addr string
	for attempt := 1; ; attempt++ {
		addr, err = startTinyproxy(t, bin, cfg, dir)
		if err == nil {
			break
		}
		if !errors.Is(err, errExited) || attempt == tinyproxyAttempts {
			t.Fatalf("servertest: tinyproxy, attempt %d: %v", attempt, err)
		}
	}
	u := &url.URL{Scheme: "http", Host: addr}
	if cfg.User != "" {
		u.User = url.UserPassword(cfg.User, cfg.Pass)
	}
	return u
}

// errExited marks a tinyproxy that exited before it accepted a connection, most likely because
// its port was taken meanwhile.
var errExited = errors.New("exited before accepting connections")

// startTinyproxy runs one tinyproxy on a free port and waits until it accepts connections. On
// success it has registered the cleanup that stops it.
func startTinyproxy(t testing.TB, bin string, cfg TinyproxyConfig, dir string) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	confPath := filepath.Join(dir, "tinyproxy.conf")
	if err := os.WriteFile(confPath, []byte(cfg.conf(port, dir)), 0o600); err != nil {
		return "", err
	}
	// An *os.File as stdout and stderr lets the child write directly: exec starts no copying
	// goroutines, and nothing waits on a pipe.
	out, err := os.Create(filepath.Join(dir, "tinyproxy.out"))
	if err != nil {
		return "", err
	}
	defer out.Close()

	cmd := exec.Command(bin, "-d", "-c", confPath)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	if err := waitAccepting(addr, exited); err != nil {
		if !errors.Is(err, errExited) {
			cmd.Process.Kill()
			<-exited
		}
		return "", fmt.Errorf("%s: %w\n%s", addr, err, tail(dir))
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("servertest: tinyproxy on %s:\n%s", addr, tail(dir))
		}
	})
	return addr, nil
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

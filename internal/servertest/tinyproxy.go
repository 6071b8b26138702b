package servertest

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/serverproc"
)

// TinyproxyStartTimeout bounds how long Tinyproxy waits for a started tinyproxy to accept TCP
// connections.
const TinyproxyStartTimeout = 5 * time.Second

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
	t   testing.TB
	cfg TinyproxyConfig
	p   *serverproc.Process
}

// StartTinyproxy is like Tinyproxy but returns the server itself.
func StartTinyproxy(t testing.TB, cfg TinyproxyConfig) *TinyproxyServer {
	t.Helper()
	bin := binary(t, "tinyproxy", tinyproxyPaths...)
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := start(t, serverproc.Spec{
		Name:    "tinyproxy",
		Bin:     bin,
		Dir:     dir,
		Logs:    []string{"tinyproxy.log"},
		Timeout: TinyproxyStartTimeout,
		Args: func(port int) ([]string, error) {
			conf := filepath.Join(dir, "tinyproxy.conf")
			if err := os.WriteFile(conf, []byte(cfg.conf(port, dir)), 0o600); err != nil {
				return nil, err
			}
			if len(cfg.Filter) > 0 {
				if err := os.WriteFile(filepath.Join(dir, "filter"), []byte(cfg.filter()), 0o600); err != nil {
					return nil, err
				}
			}
			return []string{"-d", "-c", conf}, nil
		},
	})
	return &TinyproxyServer{t: t, cfg: cfg, p: p}
}

// URL returns http://127.0.0.1:PORT, with the configured credentials as user information.
func (s *TinyproxyServer) URL() *url.URL {
	u := &url.URL{Scheme: "http", Host: s.p.Addr()}
	if s.cfg.User != "" {
		u.User = url.UserPassword(s.cfg.User, s.cfg.Pass)
	}
	return u
}

// Kill kills tinyproxy with SIGKILL and waits for it. Killing a stopped server does nothing.
func (s *TinyproxyServer) Kill() { s.p.Kill() }

// Restart starts a killed tinyproxy again on the same port and waits until it accepts
// connections; it fails the test if it cannot.
func (s *TinyproxyServer) Restart() {
	s.t.Helper()
	if err := s.p.Restart(); err != nil {
		s.t.Fatalf("servertest: tinyproxy restart: %v", err)
	}
}

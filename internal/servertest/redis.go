package servertest

import (
	"syscall"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/serverproc"
)

// RedisStartTimeout bounds how long StartRedis waits for a started redis-server to answer PING.
const RedisStartTimeout = 5 * time.Second

// RedisServer is a running redis-server on 127.0.0.1 that a test can kill, as a crash would, and
// start again on the same port. It keeps nothing on disk: a restarted server is empty, as one that
// lost its memory in an outage.
type RedisServer struct {
	t testing.TB
	p *serverproc.Process
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
	spec := serverproc.Redis(binary(t, "redis-server", serverproc.RedisPaths...), t.TempDir())
	spec.Timeout = RedisStartTimeout
	return &RedisServer{t: t, p: start(t, spec)}
}

// Addr returns 127.0.0.1:PORT, the same after a Restart.
func (s *RedisServer) Addr() string { return s.p.Addr() }

// Kill kills redis-server with SIGKILL and waits for it. Killing a stopped server does nothing.
func (s *RedisServer) Kill() { s.p.Kill() }

// Freeze stops redis-server with SIGSTOP: its connections stay open and nothing is answered, as
// with a hung server or a network that drops packets. Thaw resumes it. Freezing a stopped server
// does nothing.
func (s *RedisServer) Freeze() { s.p.Signal(syscall.SIGSTOP) }

// Thaw resumes a frozen redis-server with SIGCONT.
func (s *RedisServer) Thaw() { s.p.Signal(syscall.SIGCONT) }

// Restart starts a killed redis-server again, empty, on the same port and waits until it answers
// PING; it fails the test if it cannot.
func (s *RedisServer) Restart() {
	s.t.Helper()
	if err := s.p.Restart(); err != nil {
		s.t.Fatalf("servertest: redis-server restart: %v", err)
	}
}

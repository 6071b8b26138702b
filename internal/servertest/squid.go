package servertest

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/serverproc"
)

// SquidStartTimeout bounds how long StartSquid waits for a started squid to accept TCP
// connections.
const SquidStartTimeout = 20 * time.Second

// squidPaths are tried, in order, after a PATH lookup: Debian's squid package installs
// /usr/sbin/squid, which is often not on a user's PATH.
var squidPaths = []string{"/usr/sbin/squid", "/usr/bin/squid"}

// squidUsers are the users a squid started as root drops to, the first that exists: Debian's
// squid runs as proxy.
var squidUsers = []string{"proxy", "nobody"}

// SquidServer is a running squid (the Debian package's /usr/sbin/squid) on 127.0.0.1.
type SquidServer struct {
	p *serverproc.Process
}

// StartSquid starts a squid configured by cfg, in the foreground (squid -N), listening on
// 127.0.0.1 with a port chosen for it, and a resolver for it that answers every lookup NXDOMAIN
// (names in cfg.Hosts are not looked up). Squid's config, hosts file, logs and pid file live in
// t.TempDir(), and its logs are copied to the test output if the test fails; its shared memory
// segments (/dev/shm) are its own. Both are stopped, and waited for, when the test ends, and the
// segments removed.
//
// Started as root, squid drops to the user proxy (or nobody), which is given its directory. The
// resolver needs UDP port 53 of a loopback address: without root, CAP_NET_BIND_SERVICE or
// net.ipv4.ip_unprivileged_port_start at most 53, or without a squid binary, the test is skipped,
// or fails when the CI environment variable is true. An invalid cfg, or a squid that does not
// accept connections within SquidStartTimeout, fails the test.
func StartSquid(t testing.TB, cfg SquidConfig) *SquidServer {
	t.Helper()
	bin := binary(t, "squid", squidPaths...)
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	res, err := startNXResolver()
	if err != nil {
		if errors.Is(err, os.ErrPermission) && !inCI() {
			t.Skipf("%v; squid's lookups must reach only a resolver the test runs", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(res.Close)
	dir := t.TempDir()
	if strings.ContainsAny(dir, " \t\n\"'") {
		t.Fatalf("servertest: squid directory %q: squid.conf cannot name a path with spaces or quotes", dir)
	}
	setup := squidSetup{dir: dir, nameserver: res.IP()}
	if os.Geteuid() == 0 {
		if setup.user, err = squidUser(dir); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(cfg.hosts()), 0o644); err != nil {
		t.Fatalf("servertest: squid hosts file: %v", err)
	}
	p := start(t, serverproc.Spec{
		Name:    "squid",
		Bin:     bin,
		Dir:     dir,
		Logs:    []string{"cache.log"},
		Timeout: SquidStartTimeout,
		Args: func(port int) ([]string, error) {
			setup.port = port
			conf := filepath.Join(dir, "squid.conf")
			if err := os.WriteFile(conf, []byte(cfg.conf(setup)), 0o644); err != nil {
				return nil, err
			}
			service := squidService(port)
			t.Cleanup(func() { removeSquidSHM(service) })
			return []string{"-N", "-n", service, "-f", conf}, nil
		},
	})
	return &SquidServer{p: p}
}

// squidService is the service name (squid -n) of the squid on port. Squid names its shared memory
// segments after it (/dev/shm/NAME-cf__queues.shm…): each squid gets its own, so squids running at
// once never share one, and they can be removed once it is killed.
func squidService(port int) string { return "servertest" + strconv.Itoa(port) }

// removeSquidSHM removes the shared memory segments of the squid named service, which a killed
// squid leaves behind.
func removeSquidSHM(service string) {
	files, _ := filepath.Glob(filepath.Join("/dev/shm", service+"-*.shm"))
	for _, f := range files {
		os.Remove(f)
	}
}

// squidUser returns the user a squid started as root drops to, and gives it dir (and a way
// through dir's parent, the test's own temporary directory), where squid writes its logs and pid
// file.
func squidUser(dir string) (string, error) {
	for _, name := range squidUsers {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.Atoi(u.Uid)
		gid, err2 := strconv.Atoi(u.Gid)
		if err := errors.Join(err1, err2); err != nil {
			return "", fmt.Errorf("servertest: squid user %s: %w", name, err)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			return "", fmt.Errorf("servertest: squid directory for user %s: %w", name, err)
		}
		if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
			return "", fmt.Errorf("servertest: squid directory's parent: %w", err)
		}
		return name, nil
	}
	return "", fmt.Errorf("servertest: squid started as root needs a user to drop to: none of %v exists", squidUsers)
}

// URL returns http://127.0.0.1:PORT.
func (s *SquidServer) URL() *url.URL { return &url.URL{Scheme: "http", Host: s.p.Addr()} }

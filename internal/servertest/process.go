package servertest

import (
	"os"
	"strconv"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/serverproc"
)

// binary returns the path of the named server binary, found on PATH or at one of paths. When
// there is none it skips the test, or fails it when the CI environment variable is true: CI must
// never pass by skipping.
func binary(t testing.TB, name string, paths ...string) string {
	t.Helper()
	bin, err := serverproc.Find(name, paths...)
	if err != nil {
		if inCI() {
			t.Fatalf("servertest: %v; CI must install %s, never skip", err, name)
		}
		t.Skipf("servertest: %v; `make test` installs it", err)
	}
	return bin
}

// start starts spec's server and fails the test if it cannot. The server is killed, and waited
// for, when the test ends, and the end of its output and logs is copied to the test log if the
// test failed.
func start(t testing.TB, spec serverproc.Spec) *serverproc.Process {
	t.Helper()
	p, err := serverproc.Start(spec)
	if err != nil {
		t.Fatalf("servertest: %v", err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("servertest: %s on %s:\n%s", spec.Name, p.Addr(), p.Tail())
		}
	})
	return p
}

// inCI reports whether the CI environment variable is set to a true value, as CI services do.
func inCI() bool {
	ci, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && ci
}

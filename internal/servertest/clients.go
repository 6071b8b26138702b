package servertest

import (
	"os/exec"
	"testing"
)

// DebianPython is the interpreter Debian's python3-* packages install their modules for. The
// python3 first on a developer's PATH (pyenv, a virtualenv) usually lacks them, so client tests
// run this one by path.
const DebianPython = "/usr/bin/python3"

// ClientBinary returns the path of a client program a test drives (curl, chromium), found on
// PATH or at one of paths. When there is none it skips the test, or fails it when the CI
// environment variable is true, like the servers of this package.
func ClientBinary(t testing.TB, name string, paths ...string) string {
	t.Helper()
	return binary(t, name, paths...)
}

// PythonModules returns DebianPython after checking that it imports every one of modules
// ("requests", "scrapy"). A missing interpreter or module skips the test, or fails it when the
// CI environment variable is true.
func PythonModules(t testing.TB, modules ...string) string {
	t.Helper()
	py := binary(t, "python3 (Debian's)", DebianPython)
	for _, m := range modules {
		out, err := exec.Command(py, "-c", "import "+m).CombinedOutput()
		if err == nil {
			continue
		}
		if inCI() {
			t.Fatalf("servertest: %s cannot import %s: %v\n%s; CI must install python3-%s, never skip", py, m, err, out, m)
		}
		t.Skipf("servertest: %s cannot import %s (%v); `make test` installs python3-%s", py, m, err, m)
	}
	return py
}

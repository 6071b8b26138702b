package servertest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/servertest"
)

// outcomeTB records how a helper ended a test: Fatalf or Skipf, each stopping the helper (with a
// panic run recovers, where testing's would end the goroutine).
type outcomeTB struct {
	testing.TB
	fatal, skip string
}

func (o *outcomeTB) Helper() {}

func (o *outcomeTB) Fatalf(format string, args ...any) {
	o.fatal = fmt.Sprintf(format, args...)
	panic(o)
}

func (o *outcomeTB) Skipf(format string, args ...any) {
	o.skip = fmt.Sprintf(format, args...)
	panic(o)
}

// run calls f with a fresh outcomeTB and returns it once f has ended the test or returned.
func run(t *testing.T, f func(testing.TB)) *outcomeTB {
	o := &outcomeTB{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != o {
				panic(r)
			}
		}()
		f(o)
	}()
	return o
}

// TestMissingClientsFailUnderCI: a client program or Python module that is not installed skips
// the test locally and fails it under CI=true, naming what is missing.
func TestMissingClientsFailUnderCI(t *testing.T) {
	missing := map[string]func(testing.TB){
		"binary": func(tb testing.TB) { servertest.ClientBinary(tb, "proxybreaker-no-such-client", "/nonexistent/client") },
		"module": func(tb testing.TB) { servertest.PythonModules(tb, "proxybreaker_no_such_module") },
	}
	for name, f := range missing {
		t.Setenv("CI", "true")
		if o := run(t, f); o.fatal == "" || o.skip != "" || !strings.Contains(o.fatal, "never skip") {
			t.Errorf("%s under CI=true: fatal %q, skip %q; want a failure", name, o.fatal, o.skip)
		}
		t.Setenv("CI", "")
		if o := run(t, f); o.skip == "" || o.fatal != "" {
			t.Errorf("%s without CI: fatal %q, skip %q; want a skip", name, o.fatal, o.skip)
		}
	}
}

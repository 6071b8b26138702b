package servertest

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// DefaultTinyproxyTimeout is the idle timeout a tinyproxy gets when TinyproxyConfig.Timeout is
// zero.
const DefaultTinyproxyTimeout = 30 * time.Second

// TinyproxyConfig describes one tinyproxy. The zero value is an open proxy that adds no Via
// header and closes connections idle for DefaultTinyproxyTimeout.
type TinyproxyConfig struct {
	// Name, when set, is the host name tinyproxy puts in the Via header it adds to plain HTTP
	// requests (ViaProxyName). Empty disables the Via header (DisableViaHeader Yes). It must
	// not contain double quotes or control characters.
	Name string

	// User and Pass, when User is set, require Basic proxy credentials (BasicAuth User Pass).
	// tinyproxy 1.11 accepts only letters, digits, '.', '_' and '-' in either, and both must be
	// non-empty; anything else fails the test.
	//
	// tinyproxy answers a request without credentials 407 with Proxy-Authenticate, but 1.11.1,
	// like every release before tinyproxy pull request #549 (2024), answers wrong credentials
	// 401 Unauthorized with WWW-Authenticate (tinyproxy issue #532).
	User, Pass string

	// Bind, when set, is the source address of tinyproxy's outgoing connections (Bind), so an
	// origin sees it in r.RemoteAddr. It must be a loopback IP address such as 127.0.0.2: on
	// Linux all of 127.0.0.0/8 is routed to the loopback interface.
	Bind string

	// Timeout is how long a connection may stay idle before tinyproxy closes it, in whole
	// seconds rounded up. Zero means DefaultTinyproxyTimeout; negative is an error.
	Timeout time.Duration

	// Filter lists host names tinyproxy refuses to serve (Filter, each name matching whole host
	// names): it answers 403 Filtered, to plain HTTP requests and CONNECT alike. A name is
	// letters, digits, '-' and '.'.
	Filter []string

	// ConnectPorts, when set, are the only ports tinyproxy accepts a CONNECT to (ConnectPort): a
	// CONNECT to any other port is answered 403 Access violation. Empty allows every port.
	ConnectPorts []int
}

// filterName is what TinyproxyConfig.Filter accepts: a host name, so its filter line is a plain
// anchored expression.
var filterName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)

// credential is what tinyproxy's config grammar accepts for a BasicAuth user or password.
var credential = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// validate checks c against what tinyproxy 1.11 parses and what keeps traffic on the machine.
func (c TinyproxyConfig) validate() error {
	if strings.ContainsAny(c.Name, "\"\\") || strings.ContainsFunc(c.Name, isControl) {
		return fmt.Errorf("servertest: tinyproxy Name %q: no quotes, backslashes or control characters", c.Name)
	}
	if c.User != "" || c.Pass != "" {
		// The password is never put in an error message.
		if !credential.MatchString(c.User) {
			return fmt.Errorf("servertest: tinyproxy User %q: want one or more of A-Z a-z 0-9 . _ -", c.User)
		}
		if !credential.MatchString(c.Pass) {
			return errors.New("servertest: tinyproxy Pass: want one or more of A-Z a-z 0-9 . _ -")
		}
	}
	if c.Bind != "" {
		ip, err := netip.ParseAddr(c.Bind)
		if err != nil || !ip.IsLoopback() || ip.Zone() != "" {
			return fmt.Errorf("servertest: tinyproxy Bind %q: want a loopback IP address such as 127.0.0.2", c.Bind)
		}
	}
	if c.Timeout < 0 {
		return fmt.Errorf("servertest: tinyproxy Timeout %v: negative", c.Timeout)
	}
	for _, name := range c.Filter {
		if !filterName.MatchString(name) {
			return fmt.Errorf("servertest: tinyproxy Filter name %q: want letters, digits, '-' and '.'", name)
		}
	}
	for _, port := range c.ConnectPorts {
		if port < 1 || port > 65535 {
			return fmt.Errorf("servertest: tinyproxy ConnectPorts %d: want a port in [1, 65535]", port)
		}
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// timeoutSeconds is c.Timeout in whole seconds, rounded up, with the default applied.
func (c TinyproxyConfig) timeoutSeconds() int64 {
	d := c.Timeout
	if d == 0 {
		d = DefaultTinyproxyTimeout
	}
	return int64((d + time.Second - 1) / time.Second)
}

// conf renders the tinyproxy.conf for c listening on 127.0.0.1:port, with its log and pid files
// in dir, which must not contain double quotes. c must have been validated.
//
// There is no ConnectPort line unless ConnectPorts asks for one: with none, tinyproxy allows
// CONNECT to every port, which tests need because httptest servers get random ports (a single
// "ConnectPort 443" would turn them away with 403). There is no User or Group line either:
// tinyproxy then runs as the user that started it, after warning that it should not. With Filter,
// the filter file is dir/filter (see filter).
func (c TinyproxyConfig) conf(port int, dir string) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("# written by servertest.Tinyproxy")
	line("Port %d", port)
	line("Listen 127.0.0.1")
	line("Timeout %d", c.timeoutSeconds())
	line("MaxClients 100")
	line("Allow 127.0.0.1")
	line("LogLevel Warning")
	line(`LogFile "%s"`, filepath.Join(dir, "tinyproxy.log"))
	line(`PidFile "%s"`, filepath.Join(dir, "tinyproxy.pid"))
	if c.Name != "" {
		line(`ViaProxyName "%s"`, c.Name)
	} else {
		line("DisableViaHeader Yes")
	}
	if c.User != "" {
		line("BasicAuth %s %s", c.User, c.Pass)
	}
	if c.Bind != "" {
		line("Bind %s", c.Bind)
	}
	if len(c.Filter) > 0 {
		line(`Filter "%s"`, filepath.Join(dir, "filter"))
		line("FilterURLs Off")
		line("FilterExtended On")
		line("FilterDefaultDeny No")
	}
	for _, port := range c.ConnectPorts {
		line("ConnectPort %d", port)
	}
	return b.String()
}

// filter renders the filter file for c.Filter: one anchored extended expression per name, dots
// escaped, matched against the request's host.
func (c TinyproxyConfig) filter() string {
	var b strings.Builder
	for _, name := range c.Filter {
		fmt.Fprintf(&b, "^%s$\n", strings.ReplaceAll(name, ".", `\.`))
	}
	return b.String()
}

package servertest

import (
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// SquidConfig describes one squid. The zero value is an open forward proxy for 127.0.0.1 that
// caches nothing and knows no host names: every name it looks up gets NXDOMAIN.
type SquidConfig struct {
	// Hosts maps host names to loopback IP addresses, squid's hosts_file: requests for them reach
	// that address without a lookup. A name is letters, digits, '-' and '.'; an address is a
	// loopback IP address such as 127.0.0.1.
	Hosts map[string]string

	// Deny lists host names squid refuses to serve (http_access deny, with a dstdomain ACL): it
	// answers 403 with X-Squid-Error: ERR_ACCESS_DENIED, to plain HTTP requests and CONNECT alike.
	// Names as in Hosts; they need not be in Hosts, since squid refuses before any lookup.
	Deny []string
}

// squidName is what SquidConfig accepts as a host name: nothing squid.conf or a hosts file would
// read as syntax.
var squidName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)

// validate checks c against what keeps squid's config well formed and its traffic on the machine.
func (c SquidConfig) validate() error {
	for _, name := range slices.Sorted(maps.Keys(c.Hosts)) {
		if !squidName.MatchString(name) {
			return fmt.Errorf("servertest: squid Hosts name %q: want letters, digits, '-' and '.'", name)
		}
		ip, err := netip.ParseAddr(c.Hosts[name])
		if err != nil || !ip.IsLoopback() || ip.Zone() != "" {
			return fmt.Errorf("servertest: squid Hosts[%q] = %q: want a loopback IP address such as 127.0.0.1", name, c.Hosts[name])
		}
	}
	for _, name := range c.Deny {
		if !squidName.MatchString(name) {
			return fmt.Errorf("servertest: squid Deny name %q: want letters, digits, '-' and '.'", name)
		}
	}
	return nil
}

// squidSetup is what a squid.conf needs beyond SquidConfig: where it listens, where its files go,
// which resolver it asks and, when it starts as root, which user it drops to.
type squidSetup struct {
	port       int
	dir        string // holds the config, logs and pid file; no white space
	nameserver string // a loopback IP address whose port 53 the test answers
	user       string // cache_effective_user; "" when squid does not start as root
}

// conf renders the squid.conf for c. c must have been validated.
//
// Squid caches nothing (cache deny all, no cache_dir: no disk at all), keeps every file in dir,
// listens on 127.0.0.1 only, answers only 127.0.0.1 and asks only the test's resolver, after its
// hosts file: it never looks a name up or connects anywhere off the machine on its own. Pinger,
// ICP, HTCP and the netdb are off, and it exits at once when killed.
func (c SquidConfig) conf(s squidSetup) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("# written by servertest.StartSquid")
	line("http_port 127.0.0.1:%d", s.port)
	line("visible_hostname servertest-squid")
	line("pid_filename %s", filepath.Join(s.dir, "squid.pid"))
	line("cache_log %s", filepath.Join(s.dir, "cache.log"))
	line("access_log stdio:%s", filepath.Join(s.dir, "access.log"))
	line("cache_store_log none")
	line("coredump_dir %s", s.dir)
	line("netdb_filename none")
	line("pinger_enable off")
	line("icp_port 0")
	line("htcp_port 0")
	line("cache deny all")
	line("cache_mem 8 MB")
	line("max_filedescriptors 1024")
	line("shutdown_lifetime 0 seconds")
	line("hosts_file %s", filepath.Join(s.dir, "hosts"))
	line("dns_nameservers %s", s.nameserver)
	line("dns_timeout 5 seconds")
	line("connect_timeout 10 seconds")
	if len(c.Deny) > 0 {
		line("acl servertest_denied dstdomain %s", strings.Join(c.Deny, " "))
		line("http_access deny servertest_denied")
	}
	line("http_access allow localhost")
	line("http_access deny all")
	if s.user != "" {
		line("cache_effective_user %s", s.user)
	}
	return b.String()
}

// hosts renders c.Hosts as a hosts file, sorted by name.
func (c SquidConfig) hosts() string {
	var b strings.Builder
	b.WriteString("# written by servertest.StartSquid\n")
	for _, name := range slices.Sorted(maps.Keys(c.Hosts)) {
		fmt.Fprintf(&b, "%s %s\n", c.Hosts[name], name)
	}
	return b.String()
}

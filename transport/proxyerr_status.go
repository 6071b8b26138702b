package transport

import (
	"github.com/proxybreaker/proxybreaker/pool"
)

// ProxyStatusErrors reads the Proxy-Status response header of RFC 9209 ("The Proxy-Status HTTP
// Response Header Field", https://www.rfc-editor.org/rfc/rfc9209): a Structured Fields list with
// one member per intermediary, the last one closest to the client, whose "error" parameter names
// what went wrong from a registry of error types (RFC 9209 section 2.3). Bright Data sends it since
// October 2025 beside its own x-brd-* headers (docs.brightdata.com/proxy-networks/errorCatalog).
//
// Only the last member counts: the intermediary nearest to the client, the exit itself when it
// sends Proxy-Status. An error in an earlier member was an intermediary nearer the origin, whose
// answer the exit forwarded. When the exit sends none, the last member may be the origin's own CDN:
// the verdicts below then hold within the pair scope every response is held to, and the failures
// that may be the origin's feed the origin guard.
//
//	destination_ip_prohibited, http_request_denied           permanent  pair    proxy_denied
//	dns_error                                                neutral    origin  origin_dns
//	dns_timeout, destination_not_found,                      transient  pair    upstream (soft)
//	  destination_unavailable, destination_ip_unroutable,
//	  connection_refused, connection_terminated,
//	  connection_timeout, connection_read_timeout,
//	  connection_write_timeout, http_response_incomplete,
//	  http_response_timeout, http_upgrade_failed,
//	  http_protocol_error, tls_protocol_error,
//	  tls_certificate_error, tls_alert_received
//	http_response_header_section_size,                       neutral    origin  origin_error
//	  http_response_header_size, http_response_body_size,
//	  http_response_trailer_section_size,
//	  http_response_trailer_size, http_response_transfer_coding,
//	  http_response_content_coding
//	http_request_error                                       neutral    origin  bad_request
//	connection_limit_reached, proxy_internal_error           transient  exit    proxy_error
//	proxy_configuration_error, proxy_loop_detected           permanent  exit    proxy_error
//
// proxy_internal_response (a response the intermediary made on purpose) and unknown types are not
// read.
var ProxyStatusErrors = NewProxyErrorReader("proxy-status", readProxyStatus)

var proxyStatusErrors = map[string]pool.Verdict{
	"destination_ip_prohibited": proxyDenied,
	"http_request_denied":       proxyDenied,

	"dns_error": targetNameUnknown,

	"dns_timeout":               upstreamUnreachable,
	"destination_not_found":     upstreamUnreachable,
	"destination_unavailable":   upstreamUnreachable,
	"destination_ip_unroutable": upstreamUnreachable,
	"connection_refused":        upstreamUnreachable,
	"connection_terminated":     upstreamUnreachable,
	"connection_timeout":        upstreamUnreachable,
	"connection_read_timeout":   upstreamUnreachable,
	"connection_write_timeout":  upstreamUnreachable,
	"http_response_incomplete":  upstreamUnreachable,
	"http_response_timeout":     upstreamUnreachable,
	"http_upgrade_failed":       upstreamUnreachable,
	"http_protocol_error":       upstreamUnreachable,
	"tls_protocol_error":        upstreamUnreachable,
	"tls_certificate_error":     upstreamUnreachable,
	"tls_alert_received":        upstreamUnreachable,

	"http_response_header_section_size":  targetTooLarge,
	"http_response_header_size":          targetTooLarge,
	"http_response_body_size":            targetTooLarge,
	"http_response_trailer_section_size": targetTooLarge,
	"http_response_trailer_size":         targetTooLarge,
	"http_response_transfer_coding":      targetTooLarge,
	"http_response_content_coding":       targetTooLarge,

	"http_request_error": requestRefused,

	"connection_limit_reached":  proxyFault,
	"proxy_internal_error":      proxyFault,
	"proxy_configuration_error": {Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyError},
	"proxy_loop_detected":       {Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyError},
}

func readProxyStatus(r *ProxyReply) (pool.Verdict, bool) {
	lines := r.Header["Proxy-Status"]
	if len(lines) == 0 {
		return pool.Verdict{}, false
	}
	v, ok := proxyStatusErrors[proxyStatusError(lines[len(lines)-1])]
	return v, ok
}

// proxyStatusError returns the "error" parameter of the last member of a Proxy-Status field value,
// "" when it has none or the value cannot be read. It reads the value once, allocates nothing, and
// takes any input: quoted strings (with their escapes) and inner lists are skipped as RFC 8941
// defines them, and a value that ends inside one has no readable last member.
func proxyStatusError(field string) string {
	// Find where the last member starts: after the last comma outside strings and inner lists.
	start, depth, quoted := 0, 0, false
	for i := 0; i < len(field); i++ {
		c := field[i]
		switch {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '(':
			depth++
		case c == ')' && depth > 0:
			depth--
		case c == ',' && depth == 0:
			start = i + 1
		}
	}
	if quoted || depth != 0 {
		return ""
	}
	member := field[start:]
	// Skip the member's bare item (the intermediary's name, a token or a string), then read its
	// parameters: ;key=value, the value a token or a string.
	i := skipSFValue(member, 0)
	for i < len(member) {
		i = skipOWS(member, i)
		if i >= len(member) || member[i] != ';' {
			return ""
		}
		i = skipOWS(member, i+1)
		k := i
		for i < len(member) && member[i] != '=' && member[i] != ';' && member[i] != ' ' && member[i] != '\t' {
			i++
		}
		key := member[k:i]
		if i >= len(member) || member[i] != '=' {
			continue // a boolean parameter
		}
		v := i + 1
		i = skipSFValue(member, v)
		if key == "error" {
			return member[v:i]
		}
	}
	return ""
}

// skipSFValue returns the index just past the Structured Fields value that starts at s[i] (after
// optional white space): a quoted string, an inner list, or anything up to the next ';', white
// space or end.
func skipSFValue(s string, i int) int {
	i = skipOWS(s, i)
	if i < len(s) && s[i] == '"' {
		return skipString(s, i)
	}
	if i < len(s) && s[i] == '(' {
		for i++; i < len(s); i++ {
			switch s[i] {
			case '"':
				i = skipString(s, i) - 1
			case ')':
				return i + 1
			}
		}
		return len(s)
	}
	for i < len(s) && s[i] != ';' && s[i] != ' ' && s[i] != '\t' {
		i++
	}
	return i
}

// skipString returns the index just past the quoted string that starts at s[i], or len(s) when it
// does not end.
func skipString(s string, i int) int {
	for i++; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(s)
}

func skipOWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

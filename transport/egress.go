package transport

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"

	"github.com/proxybreaker/proxybreaker/pool"
)

// Egress IPs (pool/gateway_egress.go). A gateway template line may name the header its provider
// reports the assigned IP in (egress-header=X-Egress-IP). The transport reads it:
//
//   - over HTTPS, from the reply to the CONNECT, in the exit transport's OnProxyConnectResponse
//     (template.go), before any byte of the request reaches the origin. An IP the origin has
//     banned makes the pool retire the session; the dial fails with an egress rejection (the
//     tunnel is closed, no request sent through it), the attempt counts nothing (a neutral
//     verdict) and the request is re-dialled through a fresh session — through a rotating
//     gateway (rotate=request), through the gateway again: a new CONNECT, a new IP — at most
//     pool.MaxEgressRedials times, then fails with a *pool.EgressBannedError
//     (errors.Is pool.ErrEgressBanned) inside the *AttemptError. A request whose body cannot be
//     sent twice (a Body without GetBody) is not re-dialled: it fails with the rejection;
//   - over plain HTTP, from the origin's response — the request has reached the origin by then,
//     so the banned IP cannot be avoided for it; the session is retired all the same, and the
//     next request for the origin leaves through a fresh one.
//
// Either way the IP goes to the pool with the verdict (pool.Lease.SetEgress), which keeps health
// per (egress IP, origin) under the gateway.

// egressRejectedError is a CONNECT reply that assigned an IP the origin has banned.
type egressRejectedError struct {
	gateway, origin string
	ip              netip.Addr
}

func (e *egressRejectedError) Error() string {
	return "transport: gateway " + e.gateway + " assigned egress IP " + e.ip.String() + ", banned by " + e.origin
}

// egressHeader returns the header e's gateway reports its egress IP in; "" for none. A session of
// a template gateway and a rotating gateway (rotate=request) read it; other exits have none.
func egressHeader(e *pool.Exit) string {
	if e.Gateway() == "" && !e.Rotating() {
		return ""
	}
	h, _ := e.Attr("egress-header")
	return h
}

// parseEgress reads an IP from a header value ("" or garbage: the zero Addr).
func parseEgress(v string) netip.Addr {
	ip, err := netip.ParseAddr(strings.TrimSpace(v))
	if err != nil {
		return netip.Addr{}
	}
	return ip.Unmap()
}

// connectEgress hands the IP a CONNECT reply reports (in header h) to the attempt that dials, and
// rejects the tunnel when the pool says the origin has banned it. ctx is the dial's: it carries
// the attempt's values (net/http dials with the request's context, uncancelled).
func connectEgress(ctx context.Context, h string, res *http.Response) error {
	a, _ := ctx.Value(attemptKey).(*attempt)
	if a == nil {
		return nil
	}
	return rejectEgress(&a.lease, a.info.Exit, a.info.Origin, parseEgress(res.Header.Get(h)))
}

// RejectBannedEgress is the transport's CONNECT-reply check for a tunnel dialled outside it (the
// daemon's, package proxyd): when l's exit is a gateway's whose line names egress-header=, it
// hands the IP the reply's header reports to l (pool.Lease.SetEgress), and returns an error when
// the pool says l's origin has banned that IP — the session is retired already; close the tunnel
// unused and dial again (EgressRedial). DefaultClassifier judges that error neutral: nothing left.
func RejectBannedEgress(l *pool.Lease, reply http.Header) error {
	info := l.Info()
	h := egressHeader(info.Exit)
	if h == "" {
		return nil
	}
	return rejectEgress(l, info.Exit, info.Origin, parseEgress(reply.Get(h)))
}

// rejectEgress hands ip to l and returns an egress rejection when the pool says origin banned it.
func rejectEgress(l *pool.Lease, e *pool.Exit, origin string, ip netip.Addr) error {
	if !l.SetEgress(ip) {
		return nil
	}
	gw := e.Gateway()
	if gw == "" {
		gw = e.Label() // a rotating gateway is its own exit
	}
	return &egressRejectedError{gateway: gw, origin: origin, ip: ip}
}

// responseEgress hands the IP a plain-HTTP response through a gateway reports to the attempt's
// lease. Over HTTPS the response is the origin's own and says nothing of the gateway.
func responseEgress(a *attempt, exit *pool.Exit, out *http.Request, resp *http.Response) {
	if resp == nil || out.URL == nil || out.URL.Scheme != "http" {
		return
	}
	if h := egressHeader(exit); h != "" {
		a.lease.SetEgress(parseEgress(resp.Header.Get(h)))
	}
}

// isEgressRejection reports whether err is an egress rejection: the attempt never reached the
// origin, and its session is retired already.
func isEgressRejection(err error) bool {
	var rej *egressRejectedError
	return errors.As(err, &rej)
}

// roundTripEgress is roundTrip, re-dialled through a fresh session while the gateway assigns IPs
// the origin has banned, at most pool.MaxEgressRedials times.
func (t *Transport) roundTripEgress(req *http.Request) (*http.Response, error) {
	for tries := 1; ; tries++ {
		resp, err := t.roundTrip(req)
		if err == nil {
			return resp, nil
		}
		if redial, err := EgressRedial(err, tries); !redial {
			return resp, err
		}
		next, ok := rewind(req)
		if !ok {
			return nil, err
		}
		req = next
	}
}

// EgressRedial reports whether a failed attempt (or a tunnel's dial), the tries-th of its request,
// was a banned egress IP's rejection to dial again, and the error to return if not: after
// MaxEgressRedials the error says the gateway's IPs are banned (a *pool.EgressBannedError, inside
// the *AttemptError when err is one). Its own function, so that the targets of errors.As escape
// only on a failed attempt: a served request allocates nothing here.
func EgressRedial(err error, tries int) (bool, error) {
	var rej *egressRejectedError
	if !errors.As(err, &rej) {
		return false, err
	}
	if tries > pool.MaxEgressRedials {
		eb := &pool.EgressBannedError{Gateway: rej.gateway, Origin: rej.origin, IP: rej.ip, Tries: tries}
		var ae *AttemptError
		if errors.As(err, &ae) {
			ae.Err = eb
			return false, ae
		}
		return false, eb
	}
	return true, err
}

// rewind returns req ready to be sent again: as it is without a body, else with a fresh body from
// GetBody; false when its body cannot be read twice.
func rewind(req *http.Request) (*http.Request, bool) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, true
	}
	if req.GetBody == nil {
		return nil, false
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, false
	}
	r := *req
	r.Body = body
	return &r, true
}

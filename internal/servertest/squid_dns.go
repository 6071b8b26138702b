package servertest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
)

// nxResolver answers every DNS query it receives with NXDOMAIN, on UDP port 53 of a loopback
// address of its own, so that a squid pointed at it (dns_nameservers only takes an address; the
// port is always 53) fails every lookup at once and never asks a resolver that could reach off the
// machine.
type nxResolver struct {
	conn net.PacketConn
	wg   sync.WaitGroup
}

// nxResolverAttempts is how many random loopback addresses startNXResolver tries.
const nxResolverAttempts = 8

// startNXResolver starts a resolver on port 53 of a random address in 127.53.0.0/16, so that
// tests running at once (and a resolver the machine runs on 127.0.0.1 or 127.0.0.53) never share
// one. Binding port 53 takes root, CAP_NET_BIND_SERVICE or net.ipv4.ip_unprivileged_port_start
// at most 53: without, the error wraps os.ErrPermission.
func startNXResolver() (*nxResolver, error) {
	var err error
	for range nxResolverAttempts {
		addr := fmt.Sprintf("127.53.%d.%d:53", 1+rand.IntN(254), 1+rand.IntN(254))
		var conn net.PacketConn
		conn, err = net.ListenPacket("udp4", addr)
		if err == nil {
			r := &nxResolver{conn: conn}
			r.wg.Add(1)
			go r.serve()
			return r, nil
		}
		if errors.Is(err, os.ErrPermission) {
			break
		}
	}
	return nil, fmt.Errorf("servertest: a resolver on port 53 of a loopback address: %w", err)
}

// IP returns the address the resolver answers on (port 53).
func (r *nxResolver) IP() string {
	return r.conn.LocalAddr().(*net.UDPAddr).IP.String()
}

// Close stops the resolver and waits for it.
func (r *nxResolver) Close() {
	r.conn.Close()
	r.wg.Wait()
}

func (r *nxResolver) serve() {
	defer r.wg.Done()
	buf := make([]byte, 4096)
	for {
		n, from, err := r.conn.ReadFrom(buf)
		if err != nil {
			return // closed
		}
		if reply := nxdomain(buf[:n]); reply != nil {
			r.conn.WriteTo(reply, from)
		}
	}
}

// nxdomain returns the NXDOMAIN answer to the standard query q (RFC 1035 section 4.1: the header,
// the one question, no records), or nil when q is not one: too short, a response, another opcode,
// not exactly one question, a compressed or overlong name. It never reads past q.
func nxdomain(q []byte) []byte {
	const header = 12
	if len(q) < header || q[2]&0x80 != 0 || q[2]&0x78 != 0 || q[4] != 0 || q[5] != 1 {
		return nil
	}
	i, nameLen := header, 0
	for {
		if i >= len(q) {
			return nil
		}
		l := int(q[i])
		if l == 0 {
			i++
			break
		}
		if l&0xc0 != 0 {
			return nil // a pointer or a reserved label type: not in a query
		}
		nameLen += l + 1
		if nameLen > 255 {
			return nil
		}
		i += 1 + l
	}
	end := i + 4 // QTYPE, QCLASS
	if end > len(q) {
		return nil
	}
	reply := make([]byte, end)
	copy(reply, q[:end])
	reply[2] = 0x80 | q[2]&0x79 // QR, the query's opcode (0) and RD
	reply[3] = 0x80 | 3         // RA, RCODE NXDOMAIN
	clear(reply[6:header])      // no answer, authority or additional records
	return reply
}

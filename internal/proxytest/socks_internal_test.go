package proxytest

import (
	"bytes"
	"errors"
	"net"
	"strconv"
	"testing"
)

// FuzzReadSOCKSRequest checks that readSOCKSRequest never panics on what a client may send, that
// whatever it accepts is a loopback address, and that it accepts every well-formed CONNECT to
// 127.0.0.1.
func FuzzReadSOCKSRequest(f *testing.F) {
	f.Add([]byte{0x05, 0x01, 0x00, 0x01, 127, 0, 0, 1, 0x1f, 0x90})
	f.Add([]byte{0x05, 0x01, 0x00, 0x03, 9, 'l', 'o', 'c', 'a', 'l', 'h', 'o', 's', 't', 0x00, 0x50})
	f.Add(append(append([]byte{0x05, 0x01, 0x00, 0x04}, net.IPv6loopback...), 0x00, 0x50))
	f.Add([]byte{0x05, 0x02, 0x00, 0x01, 192, 0, 2, 1, 0x00, 0x50})
	f.Add([]byte{0x05, 0x01, 0x00, 0x03, 0xff})
	f.Fuzz(func(t *testing.T, raw []byte) {
		target, code, err := readSOCKSRequest(bytes.NewReader(raw))
		switch {
		case err == nil:
			host, _, splitErr := net.SplitHostPort(target)
			if ip := net.ParseIP(host); splitErr != nil || ip == nil || !ip.IsLoopback() {
				t.Errorf("readSOCKSRequest(% x) = %q, want a loopback host:port", raw, target)
			}
		case errors.Is(err, errSOCKSRequest):
			if code != socksNotAllowed && code != socksCmdNotSupported && code != socksAddrNotSupported {
				t.Errorf("readSOCKSRequest(% x) = reply %#x, want 0x02, 0x07 or 0x08", raw, code)
			}
		}

		// A well-formed CONNECT to 127.0.0.1, port from the input.
		if len(raw) < 2 || raw[0]|raw[1] == 0 {
			return
		}
		req := []byte{0x05, 0x01, 0x00, 0x01, 127, 0, 0, 1, raw[0], raw[1]}
		want := "127.0.0.1:" + strconv.Itoa(int(raw[0])<<8|int(raw[1]))
		if got, _, err := readSOCKSRequest(bytes.NewReader(req)); err != nil || got != want {
			t.Errorf("readSOCKSRequest(% x) = %q, %v, want %q", req, got, err, want)
		}
	})
}

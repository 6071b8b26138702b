//go:build !linux

package transport

import "net"

// unread returns 0: only Linux is asked for a socket's unread bytes (traffic_unread_linux.go).
func unread(net.Conn) int64 { return 0 }

package transport

import (
	"net"
	"syscall"
	"unsafe"
)

// unread returns how many bytes c's socket has received that nobody read (TIOCINQ, the receive
// queue's length): when a connection closes, what the proxy sent it that was never read — a TLS
// session ticket, the HTTP/2 frames after the last request, the rest of a handshake a cancelled
// dial gave up — has crossed the wire all the same, and is counted. 0 when c is no socket.
func unread(c net.Conn) int64 {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	var n int32
	rc.Control(func(fd uintptr) {
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); errno != 0 {
			n = 0
		}
	})
	return int64(max(n, 0))
}

package proxytest

import (
	"context"
	"net"
	"sync/atomic"
)

// clientBytes counts the bytes crossing the proxy's client-side sockets: what clients sent it and
// what it sent them, for plain HTTP, CONNECT tunnels (TLS included) and SOCKS5 alike.
type clientBytes struct {
	fromClients, toClients atomic.Int64
}

// countedClient is a client connection whose reads and writes add to its proxy's clientBytes.
type countedClient struct {
	net.Conn
	b *clientBytes
}

func (c *countedClient) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.b.fromClients.Add(int64(n))
	return n, err
}

func (c *countedClient) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.b.toClients.Add(int64(n))
	return n, err
}

// BytesFromClients reports how many bytes the proxy has read from its clients' connections:
// requests, CONNECT and SOCKS5 handshakes, and everything clients sent into tunnels. A byte counts
// once the proxy has read it; after Close the count is final.
func (p *Proxy) BytesFromClients() int64 { return p.bytes.fromClients.Load() }

// BytesToClients reports how many bytes the proxy has written to its clients' connections:
// responses, its own replies, and everything tunnels carried back. A byte counts once written;
// after Close the count is final.
func (p *Proxy) BytesToClients() int64 { return p.bytes.toClients.Load() }

// CloseWrite half-closes the connection when the one beneath can (a TCP connection), so that a
// tunnel's half-close reaches the client as it did unwrapped; otherwise it closes it.
func (c *countedClient) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// AwaitClientsGone returns once no client connection is open — each has been hung up by its
// client, or cut by Close — with the byte counts of the connections final, or with ctx's error
// when ctx ends first.
func (p *Proxy) AwaitClientsGone(ctx context.Context) error {
	for {
		p.mu.Lock()
		n := p.clients
		p.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-p.hangups:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

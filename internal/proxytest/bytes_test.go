package proxytest_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
)

// countingConn counts what a client writes and reads on its connection to the proxy.
type countingConn struct {
	net.Conn
	wrote, read int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read += int64(n)
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.wrote += int64(n)
	return n, err
}

// TestBytesCountClientSockets: the proxy's byte counts are exactly what the client wrote and read
// on its sockets, for a plain HTTP request, a CONNECT tunnel and a rejected request.
func TestBytesCountClientSockets(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, strings.Repeat("x", 10_000))
	}))
	defer origin.Close()
	host := strings.TrimPrefix(origin.URL, "http://")
	exchanges := []struct {
		name  string
		write string // what the client sends; it then reads until the proxy closes
	}{
		{"plain", "GET " + origin.URL + "/ HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n"},
		{"connect", "CONNECT " + host + " HTTP/1.1\r\nHost: " + host + "\r\n\r\nGET / HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n"},
		{"rejected", "CONNECT 192.0.2.1:80 HTTP/1.1\r\nHost: 192.0.2.1:80\r\n\r\n"},
	}
	for _, ex := range exchanges {
		t.Run(ex.name, func(t *testing.T) {
			px, err := proxytest.Start(proxytest.Config{Name: "count"})
			if err != nil {
				t.Fatal(err)
			}
			raw, err := net.Dial("tcp", px.Addr())
			if err != nil {
				t.Fatal(err)
			}
			c := &countingConn{Conn: raw}
			if _, err := io.WriteString(c, ex.write); err != nil {
				t.Fatal(err)
			}
			if ex.name == "connect" {
				br := bufio.NewReader(c)
				resp, err := http.ReadResponse(br, nil) // the 200 of the CONNECT
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("CONNECT: %v, %v", resp, err)
				}
				resp, err = http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				io.Copy(io.Discard, br)
			} else {
				io.Copy(io.Discard, c)
			}
			c.Close()
			px.Close() // the counts are final
			if got := px.BytesFromClients(); got != c.wrote {
				t.Errorf("BytesFromClients() = %d, want %d", got, c.wrote)
			}
			if got := px.BytesToClients(); got != c.read || got < 100 {
				t.Errorf("BytesToClients() = %d, want %d (and some)", got, c.read)
			}
		})
	}
}

package proxyd

import (
	"testing"

	"go.uber.org/goleak"
)

// The server's goroutines — accept loops, the HTTP servers, tunnels' copiers, the transport's
// connections — all end with Shutdown and the tests' proxies and origins.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

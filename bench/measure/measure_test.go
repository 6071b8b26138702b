package measure

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestVariantsReachOrigin(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") }))
	defer origin.Close()
	px := ForwardProxy()
	defer px.Close()
	vs, closeAll, err := Variants(px.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	for _, v := range vs {
		req, _ := http.NewRequest(http.MethodGet, origin.URL+"/", nil)
		resp, err := v.RT.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: RoundTrip = %v", v.Name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "hello" {
			t.Errorf("%s: body = %q, want hello", v.Name, b)
		}
	}
}

func TestBytesPerPairCountsPairs(t *testing.T) {
	b, err := BytesPerPair(10, 10)
	if err != nil {
		t.Fatal(err)
	}
	if b <= 0 {
		t.Errorf("BytesPerPair(10, 10) = %v, want > 0", b)
	}
}

func TestChurnSweeps(t *testing.T) {
	pts, err := Churn(300_000, 150_000, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pts {
		// One minute of idle TTL at 1 ms a request: at most ~60,000 recent origins remain.
		if p.Origins > 70_000 {
			t.Errorf("after %d origins: %d tracked, want at most ~60,000", p.Seen, p.Origins)
		}
	}
}

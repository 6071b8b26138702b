package measure

import (
	"github.com/proxybreaker/proxybreaker/pool"
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

func TestPairBytesCountsPairs(t *testing.T) {
	b, err := PairBytes(10, 10, pool.Verdict{Outcome: pool.Permanent, Class: pool.ClassProxyDenied})
	if err != nil {
		t.Fatal(err)
	}
	if b <= 0 {
		t.Errorf("PairBytes(10, 10) = %v, want > 0", b)
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

func TestPickAtSmallScale(t *testing.T) {
	row, err := Pick(100, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if row.Pairs != 30 || row.Ours.BytesPerPair <= 0 || row.Peer.BytesPerPair <= 0 {
		t.Errorf("Pick(100, 3) = %+v; want 30 pairs, each costing some memory in both", row)
	}
	if row.Ours.Serial.AllocsPerOp != 0 {
		t.Errorf("ours: %d allocs per pick, want 0", row.Ours.Serial.AllocsPerOp)
	}
}

func TestPickReportSmallScale(t *testing.T) {
	row, err := PickReport(100, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if row.Ours.Serial.NsPerOp <= 0 || row.Peer.Serial.NsPerOp <= 0 {
		t.Errorf("PickReport(100) = %+v; want a cost for both", row)
	}
	if row.Ours.Serial.AllocsPerOp != 0 {
		t.Errorf("ours: %d allocs per pick + report, want 0", row.Ours.Serial.AllocsPerOp)
	}
}

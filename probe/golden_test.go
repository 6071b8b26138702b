package probe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/probe"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// goldenT0 is the instant golden reports start at.
var goldenT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -run %s -update rewrites it); got:\n%s", path, t.Name(), got)
	}
}

// marshal is the report as WriteJSON streams it, checked against json.MarshalIndent.
func marshal(t *testing.T, rep *probe.Report) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), append(data, '\n')) {
		t.Errorf("WriteJSON:\n%s\ndiffers from json.MarshalIndent:\n%s", buf.Bytes(), data)
	}
	return buf.Bytes()
}

// seedResults are the seed article's three targets probed through two exits, one of them also
// meeting a challenge page, a timeout and the deadline.
func seedResults() []probe.Result {
	res := func(exit, target string, r probe.Result) probe.Result {
		r.Exit, r.Target, r.Origin = exit, "https://"+target+"/", target
		return r
	}
	a, b := "dc-1", "res-42"
	results := []probe.Result{
		res(a, "api.example", ok(120)),
		res(a, "rate.example", throttled(180, 30*time.Second)),
		res(a, "slow.example", ok(1030)),
		res(b, "api.example", blocked(240)),
		res(b, "rate.example", timedOut(5000)),
		res(b, "slow.example", cut()),
	}
	results[4].Error = "probe: timeout awaiting response headers through the exit"
	return results
}

// TestGoldenSeedReport: the JSON schema, field by field, for the seed article's three targets
// probed through two exits, one of them also meeting a challenge page, a timeout and the deadline.
// Every value is fixed, so the file is the schema's reference example (docs/probe.md).
func TestGoldenSeedReport(t *testing.T) {
	rep := probe.NewReport(seedResults(), probe.Policy{})
	rep.Started, rep.ElapsedMS, rep.DeadlineMS = goldenT0, 10000, 10000
	golden(t, "seed.golden", marshal(t, rep))

	var back probe.Report
	if err := json.Unmarshal(marshal(t, rep), &back); err != nil {
		t.Fatalf("the report does not read back: %v", err)
	}
	if back.SchemaVersion != probe.SchemaVersion || back.Verdict != probe.Critical || back.Recommendation != rep.Recommendation {
		t.Errorf("read back: version %d, verdict %v, %+v", back.SchemaVersion, back.Verdict, back.Recommendation)
	}
}

var (
	goldenPort    = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	goldenLatency = regexp.MustCompile(`("(?:latency_ms|p50|p95|p99|mean|max|elapsed_ms)": )[0-9.e+-]+`)
	goldenStarted = regexp.MustCompile(`("started": )"[^"]*"`)
)

// normalise replaces what changes from run to run in a live report: ports, latencies and the start.
func normalise(data []byte) []byte {
	data = goldenPort.ReplaceAll(data, []byte("127.0.0.1:PORT"))
	data = goldenLatency.ReplaceAll(data, []byte("${1}0"))
	return goldenStarted.ReplaceAll(data, []byte(`${1}"T0"`))
}

// TestGoldenLiveReport: a real run through in-process proxies — healthy, rejecting credentials,
// refused, throttled, challenged, hanging — over plain HTTP, with latencies, ports and the start
// time normalised.
func TestGoldenLiveReport(t *testing.T) {
	reg := &proxytest.Registry{}
	origin := startOrigin(t, false, reg, map[string]behaviour{"throttle": throttle(30), "waf": challenge})
	good := startProxy(t, proxytest.Config{Name: "good", Registry: reg})
	auth := startProxy(t, proxytest.Config{Name: "auth", Registry: reg, User: "alice", Pass: "right-pass"})
	thr := startProxy(t, proxytest.Config{Name: "throttle", Registry: reg})
	waf := startProxy(t, proxytest.Config{Name: "waf", Registry: reg})
	hang := startProxy(t, proxytest.Config{Name: "hang", Hang: true})
	exits := []*pool.Exit{
		exitVia(t, good.URL(), "good"),
		exitVia(t, auth.URLWithCredentials("alice", "wrong-pass"), "auth-wrong"),
		exitVia(t, closedProxy(t), "refused"),
		exitVia(t, thr.URL(), "throttled"),
		exitVia(t, waf.URL(), "challenged"),
		exitVia(t, hang.URL(), "hanging"),
	}
	p, err := probe.New(probe.Config{
		Exits:   exits,
		Targets: []string{origin.URL + "/", origin.URL + "/robots.txt"},
		// The hanging exit ends at its header timeout; the deadline is far enough not to cut
		// anything else on a loaded machine.
		HeaderTimeout: time.Second,
		Deadline:      20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := p.Run(context.Background())
	golden(t, "live.golden", normalise(marshal(t, rep)))
}

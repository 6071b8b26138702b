package probe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/probe"
)

// checkAccounted checks what a report from Run must say whatever the timing: n results, each
// probe either completed or cut, the cut ones neutral with a phase, the overall Stats those of
// the Results, and the summaries per target and per exit covering every probe once.
func checkAccounted(t *testing.T, rep *probe.Report, n int) {
	t.Helper()
	if len(rep.Results) != n || rep.Overall.Probes != n {
		t.Fatalf("%d results, overall.probes %d; want %d", len(rep.Results), rep.Overall.Probes, n)
	}
	o := rep.Overall
	if o.Completed+o.Cut != n {
		t.Errorf("completed %d + cut %d != %d probes", o.Completed, o.Cut, n)
	}
	if rep.CutByDeadline != (o.Cut > 0) {
		t.Errorf("cut_by_deadline %v with %d cut", rep.CutByDeadline, o.Cut)
	}
	cut := 0
	for _, r := range rep.Results {
		if r.ErrorKind != probe.KindDeadline && r.ErrorKind != probe.KindCanceled {
			continue
		}
		cut++
		if r.Outcome != pool.Neutral || r.Class != pool.ClassCanceled || r.Phase == "" || r.Success() {
			t.Errorf("cut probe %+v: want neutral, canceled, with a phase", r)
		}
		if r.Phase == "queued" && (r.LatencyMS != 0 || r.Status != 0) {
			t.Errorf("probe never started %+v: want no latency, no status", r)
		}
	}
	if cut != o.Cut || o.Failures[probe.KindDeadline]+o.Failures[probe.KindCanceled] != cut {
		t.Errorf("%d cut results; overall cut %d, failures %v", cut, o.Cut, o.Failures)
	}
	// Run aggregates as the probes finish: the result must be what aggregating them all gives.
	if want := probe.Summarize(rep.Results, rep.Policy).Stats; !reflect.DeepEqual(o, want) {
		t.Errorf("overall = %+v, want %+v (Summarize of the results)", o, want)
	}
	byTarget, byExit := 0, 0
	for s := range rep.Targets() {
		byTarget += s.Probes
	}
	for s := range rep.Exits() {
		byExit += s.Probes
	}
	if byTarget != n || byExit != n {
		t.Errorf("targets cover %d probes, exits %d; want %d each", byTarget, byExit, n)
	}
}

// TestRunCutAccountsForEveryProbe: 30 exits × 3 targets through a proxy that never answers, four
// workers. The caller cancels once all four have dialed: exactly four probes are reported in
// flight (in the phase their dial had reached) and the other 86 as never started, each (exit,
// target) once, exit by exit.
func TestRunCutAccountsForEveryProbe(t *testing.T) {
	hang := startProxy(t, proxytest.Config{Name: "hang", Hang: true})
	origin := startOrigin(t, false, nil, nil)
	const nExits, workers = 30, 4
	var exits []*pool.Exit
	for i := range nExits {
		exits = append(exits, exitVia(t, withPass(hang.URL(), "u", fmt.Sprintf("secret-%d", i)), fmt.Sprintf("hang-%02d", i)))
	}
	targets := []string{origin.URL + "/a", origin.URL + "/b", origin.URL + "/c"}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var dials atomic.Int32
	var once sync.Once
	tmpl := template()
	dial := tmpl.DialContext
	tmpl.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1) == workers {
			once.Do(cancel) // every worker holds a probe: cut them now
		}
		return dial(ctx, network, addr)
	}
	p, err := probe.New(probe.Config{
		Exits: exits, Targets: targets, Template: tmpl, Concurrency: workers,
		HeaderTimeout: -1, ConnectTimeout: -1, Deadline: probe.DefaultDeadline,
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := p.Run(ctx)
	checkAccounted(t, rep, nExits*len(targets))

	phases := map[string]int{}
	for i, r := range rep.Results {
		e, tg := i/len(targets), i%len(targets)
		if r.Exit != exits[e].Label() || r.Target != targets[tg] {
			t.Errorf("Results[%d] = (%s, %s), want (%s, %s): exit by exit, targets in order", i, r.Exit, r.Target, exits[e].Label(), targets[tg])
		}
		if r.ErrorKind != probe.KindCanceled {
			t.Errorf("Results[%d] = %+v, want canceled", i, r)
		}
		phases[r.Phase]++
	}
	inFlight := phases["connect"] + phases["proxy"] + phases["headers"]
	if inFlight != workers || phases["queued"] != nExits*len(targets)-workers {
		t.Errorf("phases %v: want %d in flight (connect, proxy or headers), the rest queued", phases, workers)
	}
	if rep.Verdict != probe.Critical || rep.Overall.Successes != 0 {
		t.Errorf("verdict %v, %d successes; want CRITICAL, 0", rep.Verdict, rep.Overall.Successes)
	}
}

// TestReportSummariesFromJSON: the summaries per target and per exit of a report from Run (laid
// out exit by exit) are those of the same report decoded from its JSON (grouped by label), and
// those its JSON carries.
func TestReportSummariesFromJSON(t *testing.T) {
	reg := &proxytest.Registry{}
	origin := startOrigin(t, false, reg, map[string]behaviour{"throttle": throttle(30), "waf": challenge, "p404": status(404)})
	var exits []*pool.Exit
	for _, name := range []string{"good", "throttle", "waf", "p404"} {
		exits = append(exits, exitVia(t, startProxy(t, proxytest.Config{Name: name, Registry: reg}).URL(), name))
	}
	exits = append(exits, exitVia(t, closedProxy(t), "refused"))
	p, err := probe.New(probe.Config{Exits: exits, Targets: []string{origin.URL + "/", origin.URL + "/x", "http://other.example.invalid/"}})
	if err != nil {
		t.Fatal(err)
	}
	rep := p.Run(context.Background())
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back probe.Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Targets []probe.TargetSummary `json:"targets"`
		Exits   []probe.ExitSummary   `json:"exits"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	collect := func(r *probe.Report) ([]probe.TargetSummary, []probe.ExitSummary) {
		var ts []probe.TargetSummary
		var es []probe.ExitSummary
		for s := range r.Targets() {
			ts = append(ts, s)
		}
		for s := range r.Exits() {
			es = append(es, s)
		}
		return ts, es
	}
	ts, es := collect(rep)
	bts, bes := collect(&back)
	if len(ts) != 3 || len(es) != 5 {
		t.Fatalf("%d target and %d exit summaries, want 3 and 5", len(ts), len(es))
	}
	for i, e := range es {
		if e.Exit != exits[i].Label() {
			t.Errorf("Exits()[%d] = %s, want %s", i, e.Exit, exits[i].Label())
		}
	}
	// JSON has no nil maps: compare through it.
	same := func(name string, a, b any) {
		t.Helper()
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) {
			t.Errorf("%s differ:\n%s\n%s", name, ja, jb)
		}
	}
	same("targets of the run and of the decoded report", ts, bts)
	same("exits of the run and of the decoded report", es, bes)
	same("targets of the run and of its JSON", ts, doc.Targets)
	same("exits of the run and of its JSON", es, doc.Exits)
}

// TestWriteJSONIsMarshalIndent: WriteJSON writes, byte for byte, what json.MarshalIndent writes
// for the report, and a newline; an empty report has empty arrays.
func TestWriteJSONIsMarshalIndent(t *testing.T) {
	for _, results := range [][]probe.Result{nil, seedResults()} {
		rep := probe.NewReport(results, probe.Policy{})
		var buf bytes.Buffer
		if err := rep.WriteJSON(&buf); err != nil {
			t.Fatal(err)
		}
		want, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if got := buf.String(); got != string(want)+"\n" {
			t.Errorf("WriteJSON of %d results:\n%s\nwant:\n%s", len(results), got, want)
		}
		if len(results) == 0 && !strings.Contains(buf.String(), `"exits": [],`) {
			t.Errorf("an empty report: %s", buf.String())
		}
	}
}

// failingWriter fails every write after the first n bytes.
type failingWriter struct{ n int }

var errWriteFailed = errors.New("disk full")

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errWriteFailed
	}
	w.n -= len(p)
	return len(p), nil
}

// TestWriteFailure: WriteJSON and WriteTable return the writer's error, wherever it fails.
func TestWriteFailure(t *testing.T) {
	var results []probe.Result
	for i := range 3000 {
		r := ok(100)
		r.Exit, r.Target, r.Origin = fmt.Sprintf("exit-%04d", i), "https://api.example/", "api.example"
		results = append(results, r)
	}
	rep := probe.NewReport(results, probe.Policy{})
	for _, w := range []struct {
		name  string
		write func(io.Writer) error
	}{{"WriteJSON", rep.WriteJSON}, {"WriteTable", rep.WriteTable}} {
		var full bytes.Buffer
		if err := w.write(&full); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, 100, full.Len() / 2, full.Len() - 1} {
			if err := w.write(&failingWriter{n}); !errors.Is(err, errWriteFailed) {
				t.Errorf("%s failing after %d of %d bytes = %v, want %v", w.name, n, full.Len(), err, errWriteFailed)
			}
		}
	}
}

// TestWriteTableManyExits: the table has a row for every exit, however many blocks it is
// aligned in.
func TestWriteTableManyExits(t *testing.T) {
	var results []probe.Result
	for i := range 2500 {
		r := ok(100)
		r.Exit, r.Target, r.Origin = fmt.Sprintf("exit-%04d", i), "https://api.example/", "api.example"
		results = append(results, r)
	}
	var buf bytes.Buffer
	if err := probe.NewReport(results, probe.Policy{}).WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	rows := 0
	for line := range strings.Lines(buf.String()) {
		if strings.HasPrefix(line, "exit-") {
			rows++
		}
	}
	if rows != 2500 {
		t.Errorf("%d exit rows, want 2500", rows)
	}
}

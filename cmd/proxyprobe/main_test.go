package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/internal/servertest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/probe"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildDir  string
)

// TestMain removes the directory the command was built into.
func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// binary builds cmd/proxyprobe once, with the go command running this test, into a temporary
// directory, and returns its path.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("no go command on PATH: %v", err)
			return
		}
		if buildDir, buildErr = os.MkdirTemp("", "proxyprobe-test-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "proxyprobe")
		out, err := exec.Command(goBin, "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// result is one run of the command.
type result struct {
	code           int
	stdout, stderr string
}

// run runs the command with args and stdin, in an empty environment but PATH, and waits at most
// a minute for it.
func run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	// HTTP_PROXY and friends are set to a proxy that would fail every probe: the command must
	// never use them.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HTTP_PROXY=http://127.0.0.1:1", "HTTPS_PROXY=http://127.0.0.1:1", "ALL_PROXY=http://127.0.0.1:1"}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok || ctx.Err() != nil {
			t.Fatalf("proxyprobe %q: %v (stderr %s)", args, err, errOut.String())
		}
		code = ee.ExitCode()
	}
	return result{code, out.String(), errOut.String()}
}

// report decodes the command's stdout as a report, failing the test if it is not valid JSON.
func (r result) report(t *testing.T) probe.Report {
	t.Helper()
	var rep probe.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("stdout is not a report: %v\n%s\nstderr: %s", err, r.stdout, r.stderr)
	}
	if rep.SchemaVersion != probe.SchemaVersion {
		t.Fatalf("schema_version = %d, want %d", rep.SchemaVersion, probe.SchemaVersion)
	}
	return rep
}

func startProxy(t *testing.T, cfg proxytest.Config) *proxytest.Proxy {
	t.Helper()
	p, err := proxytest.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// origin starts an origin answering 200, or code for requests carried by the proxies named in
// by (reg.Lookup).
func origin(t *testing.T, secure bool, reg *proxytest.Registry, by map[string]int) *httptest.Server {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reg != nil {
			if name, ok := reg.Lookup(r); ok && by[name] != 0 {
				if by[name] == http.StatusTooManyRequests {
					w.Header().Set("Retry-After", "90")
				}
				w.WriteHeader(by[name])
				return
			}
		}
		fmt.Fprint(w, "ok")
	})
	var srv *httptest.Server
	if secure {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	return srv
}

// list writes lines to a proxy list file and returns its path.
func list(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "proxies.txt")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func line(u *url.URL, label string) string { return u.String() + " label=" + label }

// summaryRE matches the summary line proxyprobe writes on a stderr that is not a terminal.
var summaryRE = regexp.MustCompile(`^proxyprobe: (HEALTHY|DEGRADED|CRITICAL) — (\d+)/(\d+) exits healthy, (\d+) failing, (\d+) parked; (\d+) targets?; (spend [0-9.]+; )?[0-9.]+m?s \(deadline [0-9a-z.]+(, \d+ of \d+ probes cut by the deadline)?\)\n$`)

// TestHealthyExitsZero: every probe succeeds: exit code 0, a HEALTHY report on stdout, and on
// stderr (a pipe, not a terminal: no progress line) the summary line alone.
func TestHealthyExitsZero(t *testing.T) {
	o := origin(t, false, nil, nil)
	a, b := startProxy(t, proxytest.Config{}), startProxy(t, proxytest.Config{})
	r := run(t, "", "-proxies", list(t, line(a.URL(), "a"), line(b.URL(), "b")), "-target", o.URL, "-target", o.URL+"/second")
	rep := r.report(t)
	if r.code != 0 || rep.Verdict != probe.Healthy || !strings.HasPrefix(r.stderr, "proxyprobe: HEALTHY — 2/2 exits healthy, 0 failing, 0 parked; 2 targets; ") {
		t.Errorf("healthy pool: code %d, verdict %v, stderr %q; want 0, HEALTHY, the summary line", r.code, rep.Verdict, r.stderr)
	}
	if !summaryRE.MatchString(r.stderr) {
		t.Errorf("stderr %q is not one summary line", r.stderr)
	}
	if rep.Overall.Probes != 4 || rep.Overall.Successes != 4 {
		t.Errorf("overall = %+v, want 4 probes, 4 successes", rep.Overall)
	}
}

// TestDegradedExitsOne: one exit of five refused (success 0.8): code 1.
func TestDegradedExitsOne(t *testing.T) {
	o := origin(t, false, nil, nil)
	p := startProxy(t, proxytest.Config{})
	addr, err := proxytest.ClosedAddr()
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{addr + " label=down"}
	for i := range 4 {
		lines = append(lines, line(p.URL(), fmt.Sprintf("up-%d", i)))
	}
	r := run(t, "", "-proxies", list(t, lines...), "-target", o.URL)
	if rep := r.report(t); r.code != 1 || rep.Verdict != probe.Degraded {
		t.Errorf("one exit in five refused: code %d, verdict %v, reasons %q; want 1, DEGRADED", r.code, rep.Verdict, rep.Reasons)
	}
}

// TestCriticalExitsTwo: a 429 makes the verdict CRITICAL (code 2) with the seed's backoff, and
// -state writes the throttled pair OPEN for its Retry-After.
func TestCriticalExitsTwo(t *testing.T) {
	reg := &proxytest.Registry{}
	o := origin(t, false, reg, map[string]int{"throttled": http.StatusTooManyRequests})
	good := startProxy(t, proxytest.Config{Name: "good", Registry: reg})
	thr := startProxy(t, proxytest.Config{Name: "throttled", Registry: reg})
	state := filepath.Join(t.TempDir(), "state.json")
	r := run(t, "", "-proxies", list(t, line(good.URL(), "good"), line(thr.URL(), "thr")), "-target", o.URL, "--state", state)
	rep := r.report(t)
	want := probe.Backoff{Initial: 90 * time.Second, Cap: 90 * time.Second, MaxRetries: 5}
	if r.code != 2 || rep.Verdict != probe.Critical || rep.Recommendation.Backoff != want {
		t.Errorf("a 429: code %d, verdict %v, backoff %+v; want 2, CRITICAL, %+v", r.code, rep.Verdict, rep.Recommendation.Backoff, want)
	}
	st := readState(t, state)
	if len(st.Breakers) != 1 || st.Breakers[0].Scope != pool.ScopePair || st.Breakers[0].Exit != "thr" ||
		st.Breakers[0].State != breaker.Open || st.Breakers[0].NextProbe.Sub(st.Saved) != 90*time.Second {
		t.Errorf("state = %+v, want (thr, origin) OPEN for 90 s", st)
	}
}

func readState(t *testing.T, path string) pool.SavedState {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st pool.SavedState
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatalf("state file: %v\n%s", err, data)
	}
	return st
}

// TestEveryProbeHangs: every proxy accepts and never answers, over http and https: stdout is
// still a valid report, every probe cut by the deadline, code 2.
func TestEveryProbeHangs(t *testing.T) {
	plain, secure := origin(t, false, nil, nil), origin(t, true, nil, nil)
	h := startProxy(t, proxytest.Config{Hang: true})
	hac := startProxy(t, proxytest.Config{HangAfterConnect: true})
	r := run(t, "", "-proxies", list(t, line(h.URL(), "hang"), line(hac.URL(), "hac")),
		"-target", plain.URL, "-target", secure.URL, "-deadline", "1s", "-header-timeout", "-1s", "-tls-timeout", "-1s")
	rep := r.report(t)
	if r.code != 2 || rep.Verdict != probe.Critical || !rep.CutByDeadline {
		t.Errorf("everything hangs: code %d, verdict %v, cut %v; want 2, CRITICAL, true", r.code, rep.Verdict, rep.CutByDeadline)
	}
	cut := fmt.Sprintf("(deadline 1s, %d of 4 probes cut by the deadline)\n", rep.Overall.Cut)
	if !summaryRE.MatchString(r.stderr) || !strings.HasPrefix(r.stderr, "proxyprobe: CRITICAL — 0/2 exits healthy, 2 failing, 0 parked; 2 targets; ") ||
		!strings.HasSuffix(r.stderr, cut) {
		t.Errorf("everything hangs: stderr %q, want the summary line ending %q", r.stderr, cut)
	}
	for _, res := range rep.Results {
		hacPlain := res.Exit == "hac" && strings.HasPrefix(res.Target, "http://")
		if !hacPlain && res.ErrorKind != probe.KindDeadline {
			t.Errorf("%s via %s: %+v, want cut by the deadline", res.Target, res.Exit, res)
		}
	}
}

// TestSummaryOnAPipe: with stderr on a pipe, a scheduler's log gets one line once the report is
// out — the verdict, the exits healthy, failing (throttled here) and parked (a rejected password),
// the targets and the time — and never a password; -quiet leaves it out.
func TestSummaryOnAPipe(t *testing.T) {
	reg := &proxytest.Registry{}
	o := origin(t, false, reg, map[string]int{"throttled": http.StatusTooManyRequests})
	good := startProxy(t, proxytest.Config{Name: "good", Registry: reg})
	thr := startProxy(t, proxytest.Config{Name: "throttled", Registry: reg})
	auth := startProxy(t, proxytest.Config{Name: "auth", Registry: reg, User: "alice", Pass: "right-hunter2"})
	proxies := list(t, line(good.URL(), "good"), line(thr.URL(), "thr"), line(auth.URLWithCredentials("alice", "wrong-hunter2"), "auth"))
	args := []string{"-proxies", proxies, "-target", o.URL, "-target", o.URL + "/second"}

	r := run(t, "", args...)
	rep := r.report(t)
	want := "proxyprobe: CRITICAL — 1/3 exits healthy, 1 failing, 1 parked; 2 targets; "
	if r.code != 2 || !summaryRE.MatchString(r.stderr) || !strings.HasPrefix(r.stderr, want) || !strings.HasSuffix(r.stderr, " (deadline 10s)\n") {
		t.Errorf("code %d, stderr %q; want 2 and one line starting %q, ending with the deadline", r.code, r.stderr, want)
	}
	if rep.Overall.Permanent == 0 || rep.Overall.Throttled == 0 {
		t.Fatalf("the report found no parked or throttled exit: %+v", rep.Overall)
	}
	if strings.Contains(r.stderr, "hunter2") {
		t.Errorf("the summary shows a password: %q", r.stderr)
	}

	q := run(t, "", append(args, "-quiet")...)
	if q.code != 2 || q.stderr != "" {
		t.Errorf("-quiet: code %d, stderr %q; want 2, nothing", q.code, q.stderr)
	}
	if q.report(t).Verdict != probe.Critical {
		t.Errorf("-quiet changed the report")
	}
}

// TestUsageErrors: bad flags and bad inputs give one line on stderr, nothing on stdout, a code of
// 64 or more, and never a password.
func TestUsageErrors(t *testing.T) {
	o := origin(t, false, nil, nil)
	good := list(t, "http://user:hunter2@127.0.0.1:1 label=x")
	badList := list(t, "127.0.0.1:8080:user:hunter2", "bad:port:user:hunter2", "http://user:hunter2@[::1")
	dupList := list(t, "127.0.0.1:1 label=x", "127.0.0.1:2 label=x")
	targets := filepath.Join(t.TempDir(), "targets.txt")
	os.WriteFile(targets, []byte("# comment\nftp://user:hunter2@127.0.0.1/\n"), 0o600)
	longTargets := filepath.Join(t.TempDir(), "long-targets.txt")
	os.WriteFile(longTargets, []byte(o.URL+"\nhttps://user:hunter2@127.0.0.1/?q="+strings.Repeat("a", 5<<20)+"\n"), 0o600)
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"unknown flag", "", []string{"-nope"}, 64, "flag provided but not defined: -nope"},
		{"no proxy list", "", []string{"-target", o.URL}, 64, "no proxy list"},
		{"no targets", "", []string{"-proxies", good}, 64, "no targets"},
		{"bad format", "", []string{"-proxies", good, "-target", o.URL, "-format", "xml"}, 64, `-format "xml"`},
		{"bad deadline", "", []string{"-proxies", good, "-target", o.URL, "-deadline", "-1s"}, 64, "-deadline"},
		{"bad duration", "", []string{"-proxies", good, "-target", o.URL, "-deadline", "soon"}, 64, "invalid value"},
		{"bad threshold", "", []string{"-proxies", good, "-target", o.URL, "-degraded-success", "1.5"}, 64, "DegradedSuccess"},
		{"positional argument", "", []string{"-proxies", good, "http://user:hunter2@127.0.0.1/"}, 64, "unexpected argument"},
		{"bad target", "", []string{"-proxies", good, "-target", "ftp://user:hunter2@127.0.0.1/"}, 64, "want an http or https URL"},
		{"bad proxy list", "", []string{"-proxies", badList, "-target", o.URL}, 65, "line 2"},
		{"bad proxy list on stdin", "127.0.0.1:8080:user:hunter2 tier=x\n", []string{"-proxies", "-", "-target", o.URL}, 65, "stdin"},
		{"empty proxy list", "# nothing\n", []string{"-proxies", "-", "-target", o.URL}, 65, "no proxies"},
		{"duplicate labels", "", []string{"-proxies", dupList, "-target", o.URL}, 65, `two proxies labelled "x"`},
		{"bad target list", "", []string{"-proxies", good, "-targets", targets}, 65, "line 2"},
		{"target line of 5 MiB", "", []string{"-proxies", good, "-targets", longTargets}, 65, "line 2: longer than 1048576 bytes"},
		{"too many workers", "", []string{"-proxies", good, "-target", o.URL, "-concurrency", "100000"}, 64, "at most 4096"},
		{"missing proxy list", "", []string{"-proxies", "/nonexistent/proxies.txt", "-target", o.URL}, 66, "/nonexistent/proxies.txt"},
		{"missing ca", "", []string{"-proxies", good, "-target", o.URL, "-ca", "/nonexistent/ca.pem"}, 66, "-ca"},
		{"unwritable state", "", []string{"-proxies", good, "-target", o.URL, "-state", "/nonexistent/dir/state.json", "-deadline", "2s"}, 73, "state"},
	} {
		r := run(t, tc.stdin, tc.args...)
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		switch {
		case r.code != tc.code:
			t.Errorf("%s: code %d, want %d (stderr %q)", tc.name, r.code, tc.code, r.stderr)
		case len(lines) != 1 || !strings.HasPrefix(lines[0], "proxyprobe: ") || !strings.Contains(lines[0], tc.want):
			t.Errorf("%s: stderr %q, want one line containing %q", tc.name, r.stderr, tc.want)
		case r.stdout != "":
			t.Errorf("%s: stdout %q, want nothing", tc.name, r.stdout)
		}
		if strings.Contains(r.stderr, "hunter2") {
			t.Errorf("%s: stderr shows a password: %q", tc.name, r.stderr)
		}
	}
}

// Regression: an unwritable -state was found only after the whole run, and the error named the
// temporary file the state goes through. It is checked before any probe is sent now, and the
// error names the path given.
func TestStateCheckedBeforeTheRun(t *testing.T) {
	var hits atomic.Int32
	o := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(o.Close)
	p := startProxy(t, proxytest.Config{})
	proxies := list(t, line(p.URL(), "a"))
	for _, state := range []string{"/nonexistent/dir/state.json", t.TempDir()} {
		r := run(t, "", "-proxies", proxies, "-target", o.URL, "-state", state)
		want := "proxyprobe: -state " + state + ": "
		if r.code != 73 || !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
			t.Errorf("-state %s: code %d, stdout %q, stderr %q; want 73, nothing, one line starting %q", state, r.code, r.stdout, r.stderr, want)
		}
		if strings.Contains(r.stderr, ".state.json.") || strings.Contains(r.stderr, "/.") {
			t.Errorf("-state %s: stderr %q names a temporary file", state, r.stderr)
		}
		if n := hits.Load(); n != 0 {
			t.Errorf("-state %s: %d probes reached the origin, want none: the state is checked first", state, n)
		}
	}
}

// Regression: a state that could not be written after the run lost the report: nothing on
// stdout, code 73. The report is written now, then the error, and the code is still 73.
func TestStateNotWrittenKeepsTheReport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// The directory passes the check before the run, and is gone when the state is written.
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		os.RemoveAll(dir)
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(o.Close)
	p := startProxy(t, proxytest.Config{})
	state := filepath.Join(dir, "state.json")
	r := run(t, "", "-proxies", list(t, line(p.URL(), "a")), "-target", o.URL, "-state", state)
	if rep := r.report(t); rep.Verdict != probe.Healthy || rep.Overall.Successes != 1 {
		t.Errorf("state not written: report verdict %v, %d successes; want the run's report, HEALTHY, 1", rep.Verdict, rep.Overall.Successes)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	want := "proxyprobe: -state " + state + ": not written: "
	if r.code != 73 || len(lines) != 2 || !summaryRE.MatchString(lines[0]+"\n") || !strings.HasPrefix(lines[1], want) {
		t.Errorf("state not written: code %d, stderr %q; want 73, the summary line, then a line starting %q", r.code, r.stderr, want)
	}
	if strings.Contains(r.stderr, ".state.json.") {
		t.Errorf("state not written: stderr %q names a temporary file", r.stderr)
	}
}

// TestHelp: -h prints the usage on stderr and exits 0.
func TestHelp(t *testing.T) {
	r := run(t, "", "-h")
	if r.code != 0 || !strings.Contains(r.stderr, "usage: proxyprobe") || !strings.Contains(r.stderr, "-deadline") || r.stdout != "" {
		t.Errorf("-h: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestTableFormat: -format table is for people: the verdict first, then targets and exits.
func TestTableFormat(t *testing.T) {
	o := origin(t, false, nil, nil)
	p := startProxy(t, proxytest.Config{})
	r := run(t, "", "-proxies", list(t, line(p.URL(), "only")), "-target", o.URL, "--format", "table")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "verdict: HEALTHY") || !strings.Contains(r.stdout, "TARGET") || !strings.Contains(r.stdout, "only") {
		t.Errorf("-format table: code %d, stdout:\n%s", r.code, r.stdout)
	}
}

// TestTinyproxy: real tinyproxy exits read from stdin — one open, one with credentials, one whose
// credentials are wrong — probing an http and an https target (-ca trusts it). The first two
// succeed; the CONNECT through the third is refused (proxy_auth), so the verdict is DEGRADED
// (code 1) and the state written with -state parks that exit in a Pool restored from it.
func TestTinyproxy(t *testing.T) {
	plain, secure := origin(t, false, nil, nil), origin(t, true, nil, nil)
	open := servertest.Tinyproxy(t, servertest.TinyproxyConfig{})
	authed := servertest.Tinyproxy(t, servertest.TinyproxyConfig{User: "alice", Pass: "right-pass"})
	bad := *authed
	bad.User = url.UserPassword("alice", "wrong-pass")
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: secure.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	stdin := strings.Join([]string{
		"# real tinyproxy exits",
		line(open, "tiny-open"),
		line(authed, "tiny-auth"),
		line(&bad, "tiny-badpass"),
	}, "\n")
	state := filepath.Join(t.TempDir(), "state.json")
	r := run(t, stdin, "-proxies", "-", "-target", plain.URL, "-target", secure.URL+"/", "-ca", ca, "-state", state, "-deadline", "20s")
	rep := r.report(t)
	for _, res := range rep.Results {
		switch res.Exit {
		case "tiny-open", "tiny-auth":
			if !res.Success() || res.Status != 200 {
				t.Errorf("%s via %s: %+v, want 200", res.Target, res.Exit, res)
			}
		case "tiny-badpass":
			// tinyproxy 1.11.1 answers wrong credentials 401, not 407 (tinyproxy issue #532). In
			// answer to a CONNECT only the proxy can have said it; to a plain HTTP request the
			// transport's classifier, which the probe shares, reads tinyproxy's own error page
			// (Server: tinyproxy/…, reason "Unauthorized"): proxy_auth on both.
			// A refused CONNECT is an error, not a response: no status is reported for it.
			https := strings.HasPrefix(res.Target, "https://")
			if (!https && res.Status != http.StatusUnauthorized) || res.Class != pool.ClassProxyAuth ||
				res.Outcome != pool.Permanent || res.Scope != pool.ScopeExit {
				t.Errorf("%s via %s: %+v, want 401 permanent proxy_auth for the exit", res.Target, res.Exit, res)
			}
		}
	}
	if r.code != 1 || rep.Verdict != probe.Degraded {
		t.Errorf("code %d, verdict %v (%q); want 1, DEGRADED", r.code, rep.Verdict, rep.Reasons)
	}
	if strings.Contains(r.stdout+r.stderr, "right-pass") || strings.Contains(r.stdout+r.stderr, "wrong-pass") {
		t.Error("the output shows a password")
	}

	exits, err := pool.ReadExits(strings.NewReader(stdin))
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(pool.WithExits(exits...))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	st := readState(t, state)
	if applied, skipped, err := p.Restore(time.Now(), st); applied != 1 || skipped != 0 || err != nil {
		t.Fatalf("Restore = %d, %d, %v; want 1 applied", applied, skipped, err)
	}
	for _, e := range p.Snapshot().Exits {
		if parked := e.Breaker.Parked; parked != (e.Exit == "tiny-badpass") {
			t.Errorf("restored exit %s parked = %v", e.Exit, parked)
		}
	}
}

// TestProgressOnATerminal: with stderr on a terminal (a pseudo-terminal from script(1)), a
// progress line is drawn there; TestHealthyExitsZero shows there is none on a pipe.
func TestProgressOnATerminal(t *testing.T) {
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		t.Skip("no script(1) to give the command a terminal")
	}
	o := origin(t, false, nil, nil)
	p := startProxy(t, proxytest.Config{})
	out := filepath.Join(t.TempDir(), "report.json")
	command := fmt.Sprintf("%q -proxies %q -target %q > %q", binary(t), list(t, line(p.URL(), "only")), o.URL, out)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tty, err := exec.CommandContext(ctx, scriptBin, "-qec", command, "/dev/null").CombinedOutput()
	if err != nil {
		t.Fatalf("script: %v\n%s", err, tty)
	}
	if !strings.Contains(string(tty), "proxyprobe: 1/1 probes") || strings.Contains(string(tty), "exits healthy") {
		t.Errorf("terminal output %q, want a progress line and no summary line", tty)
	}
	data, err := os.ReadFile(out)
	if err != nil || !json.Valid(data) || bytes.Contains(data, []byte("probes\r")) {
		t.Errorf("stdout (redirected to a file) = %q, %v: want the JSON report alone", data, err)
	}
}

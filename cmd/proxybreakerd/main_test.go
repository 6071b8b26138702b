package main

import (
	"context"
	"encoding/pem"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/internal/servertest"
)

// TestHelpListsEverySetting: -h documents every flag with its environment variable and the
// precedence.
func TestHelpListsEverySetting(t *testing.T) {
	var out strings.Builder
	if code := run(context.Background(), []string{"-h"}, noEnv, &out, io.Discard, nil, nil); code != 0 {
		t.Fatalf("-h exited %d", code)
	}
	h := out.String()
	newFlagSet(&options{}).VisitAll(func(f *flagT) {
		if !strings.Contains(h, "-"+f.Name+" ") || !strings.Contains(h, envName(f.Name)) {
			t.Errorf("-h lacks -%s or %s", f.Name, envName(f.Name))
		}
	})
	if !strings.Contains(h, "a flag wins over the environment") {
		t.Error("-h does not state the precedence")
	}
}

func noEnv(string) (string, bool) { return "", false }

// TestSettingsPrecedence: a flag wins over the environment, which wins over the config file, which
// wins over the default; a repeatable setting comes whole from one place.
func TestSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "d.conf")
	os.WriteFile(conf, []byte("# comment\nlisten = 127.0.0.1:7001\nadmin = 127.0.0.1:7002\nmax-conns = 7\nprofile = 127.0.0.1:7003=country-us\nprofile = 127.0.0.1:7004=country-de\n"), 0o600)
	env := map[string]string{"PROXYBREAKERD_ADMIN": "127.0.0.1:8002", "PROXYBREAKERD_LISTEN": "127.0.0.1:8001", "PROXYBREAKERD_CONFIG": conf,
		"PROXYBREAKERD_TUNNEL_IDLE_TIMEOUT": "90s"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	o, _, err := parseFlags([]string{"-listen", "127.0.0.1:9001"}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if o.listen != "127.0.0.1:9001" || o.admin != "127.0.0.1:8002" || o.maxConns != 7 || o.headerTO != 10*time.Second {
		t.Errorf("listen %s admin %s max-conns %d header-timeout %v; want the flag's, the env's, the file's and the default", o.listen, o.admin, o.maxConns, o.headerTO)
	}
	if o.tunnelIdleTO != 90*time.Second {
		t.Errorf("tunnel-idle-timeout %v, want the env's 90s", o.tunnelIdleTO)
	}
	if len(o.profiles) != 2 || o.profiles[1] != "127.0.0.1:7004=country-de" {
		t.Errorf("profiles %q, want both of the file's", o.profiles)
	}
	os.WriteFile(conf, []byte("lisen = x\n"), 0o600)
	if _, _, err := parseFlags(nil, lookup); err == nil || !strings.Contains(err.Error(), `line 1: unknown setting "lisen"`) {
		t.Errorf("a misspelt setting: %v, want an error naming its line", err)
	}
	env["PROXYBREAKERD_MAX_CONNS"] = "many"
	if _, _, err := parseFlags(nil, lookup); err == nil || !strings.Contains(err.Error(), "PROXYBREAKERD_MAX_CONNS") {
		t.Errorf("a bad env value: %v, want an error naming the variable", err)
	}
}

// TestRefusesAnOpenRelay: a listen address beyond loopback without credentials or an allowlist
// stops the daemon before it listens.
func TestRefusesAnOpenRelay(t *testing.T) {
	list := filepath.Join(t.TempDir(), "proxies.txt")
	os.WriteFile(list, []byte("direct\n"), 0o600)
	var errOut strings.Builder
	code := run(context.Background(), []string{"-proxies", list, "-listen", "0.0.0.0:0"}, noEnv, io.Discard, &errOut, nil, nil)
	if code != exitUsage || !strings.Contains(errOut.String(), "refusing to listen beyond loopback") {
		t.Errorf("exit %d, stderr %q; want %d refusing an open relay", code, errOut.String(), exitUsage)
	}
}

// TestCurlThroughTheDaemon: curl fetches plain HTTP, HTTPS through CONNECT and HTTP through
// --socks5-hostname via a running daemon over real upstream proxies (an in-process one and
// tinyproxy); the answers carry Proxy-Status; username options pick the exit; SIGHUP reloads the
// list; the admin port serves metrics and readiness; a clean stop exits 0 and leaves the state
// file.
func TestCurlThroughTheDaemon(t *testing.T) {
	curl := lookCurl(t)
	reg := &proxytest.Registry{}
	in, err := proxytest.Start(proxytest.Config{Name: "in", Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	tiny := servertest.Tinyproxy(t, servertest.TinyproxyConfig{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := reg.Lookup(r)
		if !ok {
			name = "other" // tinyproxy
		}
		io.WriteString(w, "hello via "+name)
	})
	plain := httptest.NewServer(h)
	defer plain.Close()
	secure := httptest.NewTLSServer(h)
	defer secure.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: secure.Certificate().Raw}), 0o600)
	list := filepath.Join(dir, "proxies.txt")
	os.WriteFile(list, []byte(in.URL().String()+" label=in country=us\n"), 0o600)
	state := filepath.Join(dir, "state.db")

	ctx, cancel := context.WithCancel(context.Background())
	hup := make(chan os.Signal, 1)
	addrs := make(chan [2]string, 1)
	done := make(chan int, 1)
	var logs syncWriter
	go func() {
		done <- run(ctx, []string{"-proxies", list, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-allow-private", "-state", state, "-reload-interval", "1h"},
			noEnv, io.Discard, &logs, hup, func(p []string, a string) { addrs <- [2]string{p[0], a} })
	}()
	var proxy, admin string
	select {
	case a := <-addrs:
		proxy, admin = a[0], a[1]
	case code := <-done:
		t.Fatalf("the daemon exited %d: %s", code, logs.String())
	}
	curlGet := func(args ...string) (string, string) {
		t.Helper()
		out, err := exec.Command(curl, append([]string{"-sS", "--max-time", "10", "-D", "-"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("curl %v: %v\n%s", args, err, out)
		}
		head, body, _ := strings.Cut(string(out), "\r\n\r\n")
		for strings.HasPrefix(body, "HTTP/") { // the CONNECT reply's head came first
			var next string
			next, body, _ = strings.Cut(body, "\r\n\r\n")
			head += "\r\n\r\n" + next
		}
		return head, body
	}
	head, body := curlGet("-x", "http://"+proxy, plain.URL+"/a")
	if body != "hello via in" || !strings.Contains(head, `Proxy-Status: proxybreakerd; next-hop="in"; received-status=200; details="success ok"`) {
		t.Errorf("curl -x (plain HTTP): %q\n%s", body, head)
	}
	head, body = curlGet("-x", "http://"+proxy, "--cacert", ca, secure.URL+"/b")
	if body != "hello via in" || !strings.Contains(head, `Proxy-Status: proxybreakerd; next-hop="in"; received-status=200; details="tunnel open`) {
		t.Errorf("curl -x (HTTPS through CONNECT): %q\n%s", body, head)
	}
	_, body = curlGet("--socks5-hostname", proxy, strings.Replace(plain.URL, "127.0.0.1", "localhost", 1)+"/c")
	if body != "hello via in" {
		t.Errorf("curl --socks5-hostname: %q", body)
	}

	// SIGHUP: the list gains tinyproxy; a username pins it.
	os.WriteFile(list, []byte(in.URL().String()+" label=in country=us\n"+tiny.String()+" label=tiny country=de\n"), 0o600)
	hup <- syscall.SIGHUP
	waitFor(t, "the reload", func() bool {
		return strings.Contains(fetch(t, "http://"+admin+"/status?format=json"), `"exit": "tiny"`)
	})
	_, body = curlGet("-x", "http://acct-country-de:x@"+proxy, plain.URL+"/d")
	if body != "hello via other" {
		t.Errorf("curl with country-de: %q, want it through tinyproxy", body)
	}
	_, body = curlGet("-x", "http://acct-exit-tiny:x@"+proxy, "--cacert", ca, secure.URL+"/e")
	if body != "hello via other" {
		t.Errorf("curl HTTPS with exit-tiny: %q, want it through tinyproxy", body)
	}
	out, err := exec.Command(curl, "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-x", "http://acct-country-x:x@"+proxy, plain.URL).CombinedOutput()
	if err != nil || string(out) != "400" {
		t.Errorf("curl with an option no exit matches: %q %v, want 400", out, err)
	}
	if m := fetch(t, "http://"+admin+"/metrics"); !strings.Contains(m, "proxybreakerd_tunnels_total") || !strings.Contains(m, "proxybreaker_attempts_total") {
		t.Errorf("/metrics lacks the daemon's or otelbreaker's series")
	}
	if r := fetch(t, "http://"+admin+"/readyz"); r != "ready\n" {
		t.Errorf("/readyz = %q", r)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("the daemon exited %d after a clean stop: %s", code, logs.String())
	}
	if _, err := os.Stat(state); err != nil {
		t.Errorf("state file: %v", err)
	}
	if strings.Contains(logs.String(), in.URL().User.String()) && in.URL().User != nil {
		t.Error("the log shows an exit's credentials")
	}
}

// lookCurl returns curl's path, skipping the test without it (failing under CI).
func lookCurl(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("curl")
	if err != nil {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatal("curl not found; CI must install it")
		}
		t.Skip("curl not found")
	}
	return p
}

func fetch(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("gave up waiting for %s", what)
}

type flagT = flag.Flag

// syncWriter collects the daemon's log lines.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestTwoDaemonsShareRedis: two daemons on one Redis (-redis), and on one Redis Cluster of three
// masters (-redis-cluster): an operator's ban of an exit on one is honoured by the other, which
// stops sending through it.
func TestTwoDaemonsShareRedis(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		twoDaemons(t, "redis://"+servertest.Redis(t)+"/0")
	})
	t.Run("cluster", func(t *testing.T) {
		addrs := servertest.StartRedisCluster(t, 3).Addrs()
		u := "redis://" + addrs[0] + "?addr=" + strings.Join(addrs[1:], "&addr=")
		twoDaemons(t, u, "-redis-cluster")
	})
}

func twoDaemons(t *testing.T, redisURL string, extra ...string) {
	curl := lookCurl(t)
	p, err := proxytest.Start(proxytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	defer origin.Close()
	list := filepath.Join(t.TempDir(), "proxies.txt")
	os.WriteFile(list, []byte(p.URL().String()+" label=shared\n"), 0o600)
	type daemon struct {
		proxy, admin string
		done         chan int
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ds []daemon
	for range 2 {
		addrs := make(chan [2]string, 1)
		d := daemon{done: make(chan int, 1)}
		var logs syncWriter
		go func() {
			d.done <- run(ctx, append([]string{"-proxies", list, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-allow-private", "-redis", redisURL}, extra...),
				noEnv, io.Discard, &logs, nil, func(p []string, a string) { addrs <- [2]string{p[0], a} })
		}()
		select {
		case a := <-addrs:
			d.proxy, d.admin = a[0], a[1]
		case code := <-d.done:
			t.Fatalf("daemon exited %d: %s", code, logs.String())
		}
		ds = append(ds, d)
	}
	code := func(d daemon) string {
		out, _ := exec.Command(curl, "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", "-x", "http://"+d.proxy, origin.URL).CombinedOutput()
		return string(out)
	}
	for _, d := range ds {
		if c := code(d); c != "200" {
			t.Fatalf("before the ban: %s, want 200", c)
		}
	}
	resp, err := http.Post("http://"+ds[0].admin+"/status", "application/json", strings.NewReader(`{"action":"ban","exit":"shared","for":"10m","reason":"ops"}`))
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("ban on the first daemon: %v %v", resp, err)
	}
	resp.Body.Close()
	waitFor(t, "the second daemon to hear of the ban", func() bool {
		return strings.Contains(fetch(t, "http://"+ds[1].admin+"/status?format=json"), `"last_failure": "ops"`)
	})
	if c := code(ds[1]); c != "503" {
		t.Errorf("the second daemon after the first banned the only exit: %s, want 503", c)
	}
	cancel()
	for _, d := range ds {
		if c := <-d.done; c != 0 {
			t.Errorf("daemon exited %d", c)
		}
	}
}

// TestCredentialsAndProfiles: with -credentials the proxy answers 407 to curl without them and
// serves it with them; a -profile listener applies its fixed options (here country-de) to every
// request on it.
func TestCredentialsAndProfiles(t *testing.T) {
	curl := lookCurl(t)
	var ps []*proxytest.Proxy
	reg := &proxytest.Registry{}
	for _, name := range []string{"us", "de"} {
		p, err := proxytest.Start(proxytest.Config{Name: name, Registry: reg})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		ps = append(ps, p)
	}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, _ := reg.Lookup(r)
		io.WriteString(w, name)
	}))
	defer origin.Close()
	dir := t.TempDir()
	list, creds := filepath.Join(dir, "proxies.txt"), filepath.Join(dir, "creds")
	os.WriteFile(list, []byte(ps[0].URL().String()+" label=us country=us\n"+ps[1].URL().String()+" label=de country=de\n"), 0o600)
	os.WriteFile(creds, []byte("# clients\nacct:s3cret\n"), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrs := make(chan []string, 1)
	done := make(chan int, 1)
	var logs syncWriter
	go func() {
		done <- run(ctx, []string{"-proxies", list, "-listen", "127.0.0.1:0", "-admin", "off", "-allow-private", "-credentials", creds,
			"-profile", "127.0.0.1:0=country-de"}, noEnv, io.Discard, &logs, nil, func(p []string, _ string) { addrs <- p })
	}()
	var ports []string
	select {
	case ports = <-addrs:
	case code := <-done:
		t.Fatalf("the daemon exited %d: %s", code, logs.String())
	}
	curlDo := func(args ...string) string {
		out, _ := exec.Command(curl, append([]string{"-sS", "--max-time", "10", "-w", " %{http_code}"}, args...)...).CombinedOutput()
		return string(out)
	}
	if out := curlDo("-o", "/dev/null", "-x", "http://"+ports[0], origin.URL); out != " 407" {
		t.Errorf("curl without credentials: %q, want 407", out)
	}
	if out := curlDo("-o", "/dev/null", "-x", "http://acct:wrong@"+ports[0], origin.URL); out != " 407" {
		t.Errorf("curl with a wrong password: %q, want 407", out)
	}
	for range 5 {
		if out := curlDo("-x", "http://acct:s3cret@"+ports[1], origin.URL); out != "de 200" {
			t.Errorf("curl through the country-de profile: %q, want de 200", out)
		}
	}
	if out := curlDo("-x", "http://acct-exit-us:s3cret@"+ports[0], origin.URL); out != "us 200" {
		t.Errorf("curl with exit-us: %q, want us 200", out)
	}
	if strings.Contains(logs.String(), "s3cret") || strings.Contains(logs.String(), "wrong") {
		t.Error("the log shows a password")
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d", code)
	}
}

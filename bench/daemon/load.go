package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// result is one load run: requests per second and latency percentiles.
type result struct {
	RPS      float64
	P50, P99 time.Duration
	Errors   int
}

// wrkLatency matches a line of wrk's --latency distribution: "     50%  412.00us".
var wrkLatency = regexp.MustCompile(`^\s+(50|99)%\s+([0-9.]+)(us|ms|s)\s*$`)

// runWrk runs wrk against target (host:port) for d with conns connections. Through a proxy
// (viaProxy), a Lua script makes wrk send absolute-URI requests for origin, as a client of a
// forward proxy does; alone, it fetches origin's "/" directly.
func runWrk(wrk, target, origin string, viaProxy bool, conns int, d time.Duration, dir string) (result, error) {
	script := filepath.Join(dir, "proxy.lua")
	lua := fmt.Sprintf("wrk.method = \"GET\"\nwrk.headers[\"Host\"] = %q\n", origin)
	if viaProxy {
		lua += fmt.Sprintf("wrk.path = %q\n", "http://"+origin+"/")
	}
	if err := os.WriteFile(script, []byte(lua), 0o644); err != nil {
		return result{}, err
	}
	threads := min(conns, 2)
	out, err := exec.Command(wrk, "-t", strconv.Itoa(threads), "-c", strconv.Itoa(conns), "-d", d.String(),
		"--latency", "-s", script, "http://"+target+"/").CombinedOutput()
	if err != nil {
		return result{}, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	var r result
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "Requests/sec:"); ok {
			r.RPS, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
		if m := wrkLatency.FindStringSubmatch(line); m != nil {
			f, _ := strconv.ParseFloat(m[2], 64)
			unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[m[3]]
			v := time.Duration(f * float64(unit))
			if m[1] == "50" {
				r.P50 = v
			} else {
				r.P99 = v
			}
		}
		if strings.Contains(line, "Non-2xx") || strings.Contains(line, "Socket errors") {
			fs := strings.FieldsFunc(line, func(c rune) bool { return c < '0' || c > '9' })
			for _, f := range fs {
				n, _ := strconv.Atoi(f)
				r.Errors += n
			}
		}
	}
	if r.RPS == 0 {
		return r, fmt.Errorf("wrk printed no rate:\n%s", out)
	}
	return r, nil
}

// runConnect is the CONNECT load, which wrk cannot generate: conns workers for d, each looping
// over one tunnel per request — dial the proxy, CONNECT to origin, read the 200, send one GET
// inside the tunnel, read the page, close — as a scraper that rotates exits per connection does.
// With proxy "" the workers dial origin directly and send the GET (the upstream alone). The
// latency is the whole iteration's.
func runConnect(proxy, origin string, conns int, d time.Duration) result {
	var (
		mu   sync.Mutex
		lats []time.Duration
		errs int
		wg   sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	req := "GET / HTTP/1.1\r\nHost: " + origin + "\r\nConnection: close\r\n\r\n"
	for range conns {
		wg.Go(func() {
			var mine []time.Duration
			bad := 0
			buf := make([]byte, 8192)
			for time.Now().Before(deadline) {
				t0 := time.Now()
				if err := oneTunnel(proxy, origin, req, buf); err != nil {
					bad++
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, mine...)
			errs += bad
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(lats)
	r := result{RPS: float64(len(lats)) / d.Seconds(), Errors: errs}
	if len(lats) > 0 {
		r.P50, r.P99 = lats[len(lats)/2], lats[len(lats)*99/100]
	}
	return r
}

// oneTunnel is one iteration of runConnect.
func oneTunnel(proxy, origin, req string, buf []byte) error {
	dst := origin
	if proxy != "" {
		dst = proxy
	}
	c, err := net.DialTimeout("tcp", dst, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReaderSize(c, 4096)
	if proxy != "" {
		if err := connect(c, br, origin); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(c, req); err != nil {
		return err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	_, err = io.CopyBuffer(io.Discard, resp.Body, buf)
	resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return err
}

// connect sends CONNECT origin on c and reads a 200 reply's head from br.
func connect(c net.Conn, br *bufio.Reader, origin string) error {
	if _, err := io.WriteString(c, "CONNECT "+origin+" HTTP/1.1\r\nHost: "+origin+"\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("CONNECT: status %d", resp.StatusCode)
	}
	return nil
}

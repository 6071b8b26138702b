package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/proxyd"
	"github.com/proxybreaker/proxybreaker/transport"
)

// The benchmark runs in three processes, so that each stays under the box's descriptor limit and
// the memory of one is not mixed with another's: the origins, the proxies under test, and the
// driver (this process's main role, with wrk as a fourth). A child prints its addresses as one
// JSON line on stdout and serves until its stdin closes.

// originAddrs is what the origin role prints.
type originAddrs struct {
	HTTP string `json:"http"` // answers every request with a small page
	Hold string `json:"hold"` // accepts TCP connections and holds them, silent: idle tunnels' far end
}

// proxyAddrs is what the proxies role prints.
type proxyAddrs struct {
	Daemon string `json:"daemon"` // proxyd over a pool with one direct exit
	Bare   string `json:"bare"`   // a bare forward proxy: httputil.ReverseProxy and a CONNECT splice
	Ctl    string `json:"ctl"`    // GET /mem: this process's memory; GET /stats: the daemon's counts
}

// page is the origin's answer: a small HTML page, as a scraper fetches.
var page = []byte(strings.Repeat("<p>proxybreaker bench page</p>\n", 32))

// serveOrigin runs the origin role.
func serveOrigin() error {
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", strconv.Itoa(len(page)))
		w.Write(page)
	})}
	go srv.Serve(hl)
	hold, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := hold.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	return announce(originAddrs{HTTP: hl.Addr().String(), Hold: hold.Addr().String()})
}

// serveProxies runs the proxies role; with cpuprofile it writes a CPU profile of the whole run
// there (the bare proxy's samples included: look at proxyd, pool and transport frames).
func serveProxies(cpuprofile string) error {
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	exits, err := pool.ReadExits(strings.NewReader("direct label=direct\n"))
	if err != nil {
		return err
	}
	p, err := pool.New(pool.WithExits(exits...))
	if err != nil {
		return err
	}
	s, err := proxyd.New(p, proxyd.Config{AllowPrivate: true, MaxConns: 1 << 20})
	if err != nil {
		return err
	}
	dl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go s.Serve(dl, "")
	bl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go (&http.Server{Handler: newBareProxy()}).Serve(bl)
	cl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/mem", func(w http.ResponseWriter, _ *http.Request) { json.NewEncoder(w).Encode(readMem()) })
	mux.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) { json.NewEncoder(w).Encode(s.Stats()) })
	go (&http.Server{Handler: mux}).Serve(cl)
	err = announce(proxyAddrs{Daemon: dl.Addr().String(), Bare: bl.Addr().String(), Ctl: cl.Addr().String()})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.Shutdown(ctx)
	return err
}

// announce prints addrs and waits for stdin to close.
func announce(addrs any) error {
	if err := json.NewEncoder(os.Stdout).Encode(addrs); err != nil {
		return err
	}
	io.Copy(io.Discard, os.Stdin)
	return nil
}

// mem is a process's memory: resident set (the kernel's count) and the Go runtime's heap and
// stacks in use after a collection.
type mem struct {
	RSS   uint64 `json:"rss"`
	Heap  uint64 `json:"heap"`
	Stack uint64 `json:"stack"`
	FDs   int    `json:"fds"`
}

func readMem() mem {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := mem{Heap: ms.HeapInuse, Stack: ms.StackInuse}
	if f, err := os.Open("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				m.RSS = kb << 10
			}
		}
		f.Close()
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		m.FDs = len(ents)
	}
	return m
}

// bareProxy is the baseline: what a Go forward proxy is with no pool — httputil.ReverseProxy
// forwarding absolute-URI requests over one http.Transport (the same settings as the daemon's
// transport.DefaultBaseTemplate), and CONNECT answered 200 and spliced.
type bareProxy struct {
	rp *httputil.ReverseProxy
}

func newBareProxy() *bareProxy {
	return &bareProxy{rp: &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.Out.URL = r.In.URL },
		Transport: transport.DefaultBaseTemplate(),
		// wrk cuts its connections at the end of a run: the canceled requests are no news.
		ErrorLog: log.New(io.Discard, "", 0),
	}}
}

func (b *bareProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		b.rp.ServeHTTP(w, r)
		return
	}
	up, err := net.DialTimeout("tcp", r.Host, 10*time.Second)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		return
	}
	fmt.Fprint(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	go func() {
		io.Copy(up, brw)
		up.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(c, up)
	c.Close()
	up.Close()
}

package proxyd

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/http/pprof"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/statuspage"
)

// AdminConfig tunes the admin handler.
type AdminConfig struct {
	// Metrics serves GET /metrics: the Prometheus exporter's handler (the otelbreaker instruments
	// and the daemon's, RegisterMetrics). Nil: /metrics is 404.
	Metrics http.Handler
	// Loaded reports whether the daemon's state is loaded (the store restored, the proxy list
	// read): /readyz is 503 until it is. Nil: always loaded.
	Loaded func() bool
	// Pprof mounts net/http/pprof under /debug/pprof/. Off by default.
	Pprof bool
	// StatusOptions are passed to the status page (statuspage.New), after WithOverrides.
	StatusOptions []statuspage.Option
}

// Admin returns the admin handler of s. Mount it on a loopback listener (it checks no identity):
//
//	GET  /healthz          200 while the process serves
//	GET  /readyz           200 once the state is loaded and at least one exit can serve; else 503 and why
//	GET  /metrics          Prometheus text (AdminConfig.Metrics)
//	GET  /status           the breakers: HTML, or JSON with ?format=json (package statuspage)
//	POST /status           ban or release: {"action":"ban","exit":"dc-1","origin":"shop.example","for":"15m"}
//	POST /api/report       a client's verdict for (exit or username, site): Report
//	POST /api/ban          {"exit":"dc-1","site":"https://shop.example/","for":"15m","reason":"…"}: Override
//	POST /api/release      {"exit":"dc-1","site":"shop.example"}; no site: the exit for every site
//	GET  /api/stats        the daemon's own counts (Stats), JSON
//	     /debug/pprof/     with AdminConfig.Pprof
func (s *Server) Admin(c AdminConfig) (http.Handler, error) {
	page, err := statuspage.New(s.pool, append([]statuspage.Option{statuspage.WithOverrides(s.pool), statuspage.WithTitle("proxybreakerd")}, c.StatusOptions...)...)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if why := s.notReady(c.Loaded); why != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready: "+why)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	if c.Metrics != nil {
		mux.Handle("GET /metrics", c.Metrics)
	}
	mux.Handle("/status", page)
	mux.HandleFunc("/api/report", s.serveReport)
	mux.HandleFunc("POST /api/ban", s.serveOverride(true))
	mux.HandleFunc("POST /api/release", s.serveOverride(false))
	mux.HandleFunc("GET /api/stats", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Stats()) })
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/status", http.StatusFound) })
	if c.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux, nil
}

// notReady says why the daemon is not ready, or "".
func (s *Server) notReady(loaded func() bool) string {
	if loaded != nil && !loaded() {
		return "state not loaded yet"
	}
	exits := s.pool.Snapshot().Exits
	if len(exits) == 0 {
		return "the pool has no exits"
	}
	for _, e := range exits {
		if e.Breaker.State != breaker.Open {
			return ""
		}
	}
	return fmt.Sprintf("all %d exits are open (parked or cooling)", len(exits))
}

func isJSON(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

package statuspage

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
)

// DefaultMaxPairs is how many pair rows a page shows by default: the most severe first.
const DefaultMaxPairs = 1000

// DefaultRefresh is how often the HTML page fetches itself anew and updates in place.
const DefaultRefresh = 5 * time.Second

// Source is what the page shows. *pool.Pool implements it.
type Source interface {
	Snapshot() pool.Snapshot
}

// Handler serves the breaker table: as JSON when the query has format=json or the request
// prefers application/json, else as an HTML page. It answers GET and HEAD. It is safe for
// concurrent use; each request reads one snapshot.
type Handler struct {
	src         Source
	overrider   Overrider // nil: overrides are off (WithOverrides)
	title       string
	refresh     time.Duration
	maxPairs    int
	gridExits   int
	gridOrigins int
}

var _ http.Handler = (*Handler)(nil)

// Option configures a Handler.
type Option interface{ apply(*Handler) error }

type optionFunc func(*Handler) error

func (f optionFunc) apply(h *Handler) error { return f(h) }

// WithTitle sets the HTML page's title. Default "proxybreaker".
func WithTitle(title string) Option {
	return optionFunc(func(h *Handler) error { h.title = title; return nil })
}

// WithRefresh sets how often the HTML page updates itself: an inline script fetches the page
// every d and swaps in the new content without a reload (keeping the scroll position); without
// JavaScript, a meta refresh reloads it every d rounded to whole seconds, at least one. Zero makes
// a static page. Default DefaultRefresh.
func WithRefresh(d time.Duration) Option {
	return optionFunc(func(h *Handler) error {
		if d < 0 {
			return fmt.Errorf("statuspage: WithRefresh(%v): must not be negative", d)
		}
		h.refresh = d
		return nil
	})
}

// WithMaxPairs bounds the pair rows of a page: a pool can track millions of pairs. The most
// severe rows are kept; Summary.PairsOmitted counts the rest. Default DefaultMaxPairs; negative
// shows all.
func WithMaxPairs(n int) Option {
	return optionFunc(func(h *Handler) error { h.maxPairs = n; return nil })
}

// WithGrid bounds the exit × origin grid: at most exits rows (the exits in the most trouble) and
// origins columns (the origins with the most breaker activity); the page says how many it left
// out. Negative shows all. Defaults DefaultGridExits and DefaultGridOrigins.
func WithGrid(exits, origins int) Option {
	return optionFunc(func(h *Handler) error { h.gridExits, h.gridOrigins = exits, origins; return nil })
}

// New returns a Handler showing src.
func New(src Source, opts ...Option) (*Handler, error) {
	if src == nil {
		return nil, errors.New("statuspage: New: nil source")
	}
	h := &Handler{src: src, title: "proxybreaker", refresh: DefaultRefresh, maxPairs: DefaultMaxPairs,
		gridExits: DefaultGridExits, gridOrigins: DefaultGridOrigins}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(h); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// Table returns the table the page would show now, its grid sorted by status.
func (h *Handler) Table() Table { return h.table(SortStatus) }

func (h *Handler) table(sort string) Table {
	t := build(h.src.Snapshot(), layout{maxPairs: h.maxPairs, gridExits: h.gridExits, gridOrigins: h.gridOrigins, sort: sort})
	if c, ok := h.src.(Capacitor); ok {
		for i := range t.Origins {
			oc := c.Capacity(t.Origins[i].Origin)
			t.Origins[i].Capacity = &oc
		}
	}
	return t
}

// sortParam is the grid order a request asks for with ?sort=; anything unknown is SortStatus.
func sortParam(r *http.Request) string {
	if r.URL.Query().Get("sort") == SortName {
		return SortName
	}
	return SortStatus
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && h.overrider != nil {
		h.serveOverride(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		allow := "GET, HEAD"
		if h.overrider != nil {
			allow += ", POST"
		}
		w.Header().Set("Allow", allow)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	t := h.table(sortParam(r))
	var buf bytes.Buffer
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Vary", "Accept")
	if wantsJSON(r) {
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(t); err != nil {
			http.Error(w, "statuspage: encoding the table failed", http.StatusInternalServerError)
			return
		}
		hdr.Set("Content-Type", "application/json")
	} else {
		if err := render(&buf, h.title, h.refresh, t); err != nil {
			http.Error(w, "statuspage: rendering the page failed", http.StatusInternalServerError)
			return
		}
		hdr.Set("Content-Type", "text/html; charset=utf-8")
		hdr.Set("Content-Security-Policy", csp)
	}
	hdr.Set("Content-Length", strconv.Itoa(buf.Len()))
	if r.Method == http.MethodHead {
		return
	}
	w.Write(buf.Bytes())
}

// wantsJSON reports whether the request asks for JSON: format=json, or an Accept header that
// ranks application/json above text/html. format=html asks for the page.
func wantsJSON(r *http.Request) bool {
	switch r.URL.Query().Get("format") {
	case "json":
		return true
	case "html":
		return false
	}
	jsonQ, htmlQ := -1.0, -1.0
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && f <= 1 {
				q = f
			}
		}
		switch mt {
		case "application/json":
			jsonQ = math.Max(jsonQ, q)
		case "text/html":
			htmlQ = math.Max(htmlQ, q)
		}
	}
	return jsonQ > 0 && jsonQ > htmlQ
}

// csp lets the page run its one inline script (by hash) and fetch itself, and nothing else: no
// external assets, no frames, no forms.
var csp = "default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-" + scriptHash(liveJS) +
	"'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func scriptHash(js string) string {
	sum := sha256.Sum256([]byte(js))
	return base64.StdEncoding.EncodeToString(sum[:])
}

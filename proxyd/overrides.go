package proxyd

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Override is the JSON body of POST /api/ban and /api/release: the exit by label, the site as a
// URL, host or host:port (its origin key is the pair's; empty: the exit for every site), and for a
// ban how long (a Go duration) and why.
type Override struct {
	Exit   string `json:"exit"`
	Site   string `json:"site,omitempty"`
	For    string `json:"for,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// serveOverride is POST /api/ban (ban true) and /api/release: pool.Pool.Ban and Release, which
// observers, stores and the fleet see as any transition (and which close the live tunnels on a
// banned pair or exit).
func (s *Server) serveOverride(ban bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !isJSON(r) {
			http.Error(w, "proxyd: a JSON body (Content-Type: application/json)", http.StatusUnsupportedMediaType)
			return
		}
		var o Override
		dec := json.NewDecoder(io.LimitReader(r.Body, maxReportBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			http.Error(w, "proxyd: "+jsonErr(err), http.StatusBadRequest)
			return
		}
		origin := ""
		if o.Site != "" {
			origin = s.OriginOf(o.Site)
		}
		var err error
		if ban {
			d, perr := time.ParseDuration(o.For)
			if perr != nil {
				http.Error(w, fmt.Sprintf("proxyd: for %q: want a Go duration such as 15m", clip(o.For)), http.StatusBadRequest)
				return
			}
			err = s.pool.Ban(o.Exit, origin, d, o.Reason)
		} else {
			err = s.pool.Release(o.Exit, origin)
		}
		if err != nil {
			http.Error(w, "proxyd: "+err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"exit": o.Exit, "origin": origin})
	}
}

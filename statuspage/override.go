package statuspage

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
)

// Capacitor is a Source that also answers for an origin's capacity; *pool.Pool is one. The JSON
// table then carries each origin's pool.Capacity.
type Capacitor interface {
	Capacity(origin string) pool.Capacity
}

// Overrider is what WithOverrides acts on; *pool.Pool implements it.
type Overrider interface {
	Ban(label, origin string, d time.Duration, reason string) error
	Release(label, origin string) error
}

// Override is the JSON body of a POST to a Handler with overrides on: ban the exit labelled Exit
// for Origin ("" for every origin) for For (a Go duration, "15m"), or release it.
type Override struct {
	Action string `json:"action"` // "ban" or "release"
	Exit   string `json:"exit"`
	Origin string `json:"origin,omitempty"`
	For    string `json:"for,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// maxOverrideBody bounds a POSTed override.
const maxOverrideBody = 4 << 10

// WithOverrides lets the page's POST requests ban and release pairs and exits on o (pool.Pool.Ban,
// pool.Pool.Release): a JSON Override with Content-Type application/json, answered 204, or 400
// with the error. Off by default. The handler checks no identity: mount it behind the
// authentication of the console that serves it. Requiring JSON keeps a cross-site HTML form from
// posting one (a browser sends JSON across origins only after a CORS preflight, which the handler
// does not answer).
func WithOverrides(o Overrider) Option {
	return optionFunc(func(h *Handler) error {
		if o == nil {
			return fmt.Errorf("statuspage: WithOverrides(nil)")
		}
		h.overrider = o
		return nil
	})
}

func (h *Handler) serveOverride(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, "statuspage: an override is a JSON body (Content-Type: application/json)", http.StatusUnsupportedMediaType)
		return
	}
	var o Override
	dec := json.NewDecoder(io.LimitReader(r.Body, maxOverrideBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		http.Error(w, "statuspage: override: "+err.Error(), http.StatusBadRequest)
		return
	}
	var err error
	switch o.Action {
	case "ban":
		var d time.Duration
		if d, err = time.ParseDuration(o.For); err != nil {
			err = fmt.Errorf("for %q: want a Go duration such as 15m", o.For)
			break
		}
		err = h.overrider.Ban(o.Exit, o.Origin, d, o.Reason)
	case "release":
		err = h.overrider.Release(o.Exit, o.Origin)
	default:
		err = fmt.Errorf("action %q: want ban or release", o.Action)
	}
	if err != nil {
		http.Error(w, "statuspage: override: "+err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

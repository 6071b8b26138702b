package proxyd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
)

// Clients report what they saw inside a tunnel — a CAPTCHA page, a 403, a 429 — which the daemon
// cannot read (TLS is end to end). A report names the site and the exit: by its label (the
// next-hop of the Proxy-Status the client got), or by the proxy username the client used, whose
// session option the daemon maps to the exit that carried that session for that site (HTTPS
// clients never see a CONNECT reply's headers). A username is taken without its password: a
// report that holds one is refused.
//
// The verdict goes through the pool's report path, as a plain attempt's would: the daemon picks
// the named exit for the site (pool.Request.Exit, failing fast) and reports the verdict on that
// lease, so a block trips the pair at once (a decisive verdict), a 403 is judged by the pool's
// evidence like any plain 403, and observers, snapshots and stores see the transition as any
// other. An exit whose pair (or own breaker) is already open for the site takes no lease: the
// report changes nothing and says so.

// Report is the JSON body of POST /api/report.
type Report struct {
	// Site is the URL, host or host:port the client fetched; its origin key is the pair's.
	Site string `json:"site"`
	// Exit is the exit's label (Proxy-Status next-hop). Either Exit or Username.
	Exit string `json:"exit,omitempty"`
	// Username is the proxy username the client used ("acct-session-abc-country-us"), never its
	// password.
	Username string `json:"username,omitempty"`
	// Verdict is what the client saw: "blocked" (a block or challenge page; "captcha" is the same),
	// "rate_limited" (a 429), "forbidden" (a plain 403, judged by the pool), or "ok".
	Verdict string `json:"verdict"`
	// RetryAfter is the site's Retry-After, a Go duration ("30s"), for blocked and rate_limited.
	RetryAfter string `json:"retry_after,omitempty"`
	// Detector names what recognised a block (the client's middleware); default "client".
	Detector string `json:"detector,omitempty"`
}

// ReportResult is the answer to a report.
type ReportResult struct {
	Exit   string `json:"exit"`
	Origin string `json:"origin"`
	// Applied is false when the exit took no lease for the site: its pair or its own breaker is
	// open already (Reason says why); nothing changed.
	Applied bool   `json:"applied"`
	Reason  string `json:"reason,omitempty"`
	// Verdict is the verdict as the breakers counted it (a "forbidden" report judged by the pool).
	Verdict   *ReportedVerdict `json:"verdict,omitempty"`
	PairState string           `json:"pair_state,omitempty"`
	ExitState string           `json:"exit_state,omitempty"`
}

// ReportedVerdict is a verdict in a ReportResult.
type ReportedVerdict struct {
	Outcome           string  `json:"outcome"`
	Scope             string  `json:"scope"`
	Class             string  `json:"class"`
	Detector          string  `json:"detector,omitempty"`
	RetryAfterSeconds float64 `json:"retry_after_seconds,omitempty"`
}

// maxReportBody bounds a report's JSON.
const maxReportBody = 4 << 10

// reportVerdict returns the verdict a client's report stands for.
func (r Report) verdict() (pool.Verdict, error) {
	var ra time.Duration
	if r.RetryAfter != "" {
		d, err := time.ParseDuration(r.RetryAfter)
		if err != nil || d < 0 {
			return pool.Verdict{}, fmt.Errorf("retry_after %q: want a Go duration such as 30s", clip(r.RetryAfter))
		}
		ra = d
	}
	det := r.Detector
	if det == "" {
		det = "client"
	}
	if len(det) > 32 {
		return pool.Verdict{}, errors.New("detector: at most 32 bytes")
	}
	switch r.Verdict {
	case "blocked", "captcha":
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, RetryAfter: ra, Detector: det}, nil
	case "rate_limited":
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: ra}, nil
	case "forbidden":
		return pool.Verdict{Outcome: pool.Success, Class: pool.ClassOrigin4xx, Suspect: true}, nil
	case "ok":
		return pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}, nil
	}
	return pool.Verdict{}, fmt.Errorf("verdict %q: want blocked, captcha, rate_limited, forbidden or ok", clip(r.Verdict))
}

// ReportError is a report the daemon cannot apply: Status is the HTTP status to answer.
type ReportError struct {
	Status int
	Reason string
}

func (e *ReportError) Error() string { return "proxyd: report: " + e.Reason }

// Report applies a client's report (see Report). Session ids never appear in its errors.
func (s *Server) Report(ctx context.Context, r Report) (ReportResult, error) {
	bad := func(status int, format string, args ...any) (ReportResult, error) {
		return ReportResult{}, &ReportError{Status: status, Reason: fmt.Sprintf(format, args...)}
	}
	v, err := r.verdict()
	if err != nil {
		return bad(http.StatusBadRequest, "%v", err)
	}
	if r.Site == "" {
		return bad(http.StatusBadRequest, "site: the URL or host the client fetched is required")
	}
	origin := s.OriginOf(r.Site)
	label := r.Exit
	switch {
	case label != "" && r.Username != "":
		return bad(http.StatusBadRequest, "give exit or username, not both")
	case r.Username != "":
		if strings.Contains(r.Username, ":") {
			return bad(http.StatusBadRequest, "username: the proxy username only, never its password")
		}
		_, text := SplitUsername(r.Username)
		o, err := ParseOptions(text)
		if err != nil {
			return bad(http.StatusBadRequest, "username: %v", err)
		}
		if o.Exit != "" {
			label = o.Exit
			break
		}
		if o.Session == "" {
			return bad(http.StatusBadRequest, "username: no session option, so no exit to map it to (name the exit)")
		}
		l, ok := s.ExitOfSession(o.Session, origin)
		if !ok {
			return bad(http.StatusNotFound, "username: no exit carried that session for %s lately", origin)
		}
		label = l
	case label == "":
		return bad(http.StatusBadRequest, "exit or username is required")
	}
	if s.pool.Exit(label) == nil {
		return bad(http.StatusNotFound, "no exit labelled %q", clip(label))
	}
	res := ReportResult{Exit: label, Origin: origin}
	lease, err := s.pool.Pick(ctx, pool.Request{Origin: origin, Exit: label, FailFast: true})
	if err != nil {
		res.Reason = err.Error()
		return res, nil
	}
	rep := lease.Report(v)
	res.Applied = true
	rv := rep.Verdict
	res.Verdict = &ReportedVerdict{Outcome: rv.Outcome.String(), Scope: rv.Scope.String(), Class: string(rv.Class),
		Detector: rv.Detector, RetryAfterSeconds: rv.RetryAfter.Seconds()}
	res.PairState, res.ExitState = rep.PairState.String(), rep.ExitState.String()
	return res, nil
}

// serveReport is POST /api/report.
func (s *Server) serveReport(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "proxyd: report: POST a JSON body", http.StatusMethodNotAllowed)
		return
	}
	if !isJSON(r) {
		http.Error(w, "proxyd: report: a JSON body (Content-Type: application/json)", http.StatusUnsupportedMediaType)
		return
	}
	var rep Report
	dec := json.NewDecoder(io.LimitReader(r.Body, maxReportBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		http.Error(w, "proxyd: report: "+jsonErr(err), http.StatusBadRequest)
		return
	}
	res, err := s.Report(r.Context(), rep)
	var re *ReportError
	if errors.As(err, &re) {
		http.Error(w, re.Error(), re.Status)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// jsonErr describes a JSON decoding error without quoting the body (which could hold a password
// given in the wrong field).
func jsonErr(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %s: want a %s", te.Field, te.Type)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + clip(strings.TrimPrefix(err.Error(), "json: unknown field ")) + " (fields: site, exit, username, verdict, retry_after, detector)"
	}
	return "malformed JSON"
}

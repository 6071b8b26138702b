package pool

import (
	"strings"
	"sync"
	"time"
)

// Retries is what the attempts of one logical request share: the exits that failed it, so a retry
// goes out through another exit while one is ready (Request.Retries); the failed attempts, for the
// error a retry layer gives up with; and the instant the next attempt may go, which a retry layer
// notes when a refusal asks it to wait. Make one per logical request (transport.ContextWithRetries
// does, for requests through a transport). A Retries is safe for concurrent use; the zero value is
// ready to use, and a nil *Retries remembers nothing.
type Retries struct {
	mu        sync.Mutex
	avoid     [8]*Exit // the exits that failed the request, most recent last
	next      int
	failures  []FailedAttempt
	notBefore time.Time
}

// MaxFailedAttempts is how many failed attempts a Retries remembers: the most recent ones.
const MaxFailedAttempts = 8

// FailedAttempt is one failed attempt of a logical request.
type FailedAttempt struct {
	Exit    string // the exit's label
	Verdict Verdict
	Err     error // what the attempt returned, as the retry layer saw it; may be nil
}

// NewRetries returns an empty Retries.
func NewRetries() *Retries { return &Retries{} }

// avoidExit notes that e failed the request. Lease.Report calls it for failures.
func (r *Retries) avoidExit(e *Exit) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.avoid[r.next] = e
	r.next = (r.next + 1) % len(r.avoid)
	r.mu.Unlock()
}

// Avoids reports whether e failed the request: a pick for it passes e over while another exit is
// ready. A nil Retries avoids nothing.
func (r *Retries) Avoids(e *Exit) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.avoid {
		if f == e && e != nil {
			return true
		}
	}
	return false
}

func (r *Retries) empty() bool {
	if r == nil {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.avoid[0] == nil
}

// Record adds a failed attempt, forgetting the oldest past MaxFailedAttempts.
func (r *Retries) Record(f FailedAttempt) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.failures) == MaxFailedAttempts {
		r.failures = append(r.failures[:0], r.failures[1:]...)
	}
	r.failures = append(r.failures, f)
}

// Failures returns the failed attempts recorded, oldest first.
func (r *Retries) Failures() []FailedAttempt {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]FailedAttempt(nil), r.failures...)
}

// WaitUntil notes that the next attempt should not go before t.
func (r *Retries) WaitUntil(t time.Time) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.notBefore = t
	r.mu.Unlock()
}

// NotBefore returns the instant WaitUntil last noted; the zero time if none.
func (r *Retries) NotBefore() time.Time {
	if r == nil {
		return time.Time{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.notBefore
}

// FormatGiveUp is the message of an error that gives up on a logical request: head (what gave up,
// and why), then "; failed attempts: CLASS via EXIT, …" with a hint of what to check when every
// attempt failed for good (a pool whose proxies all reject their credentials, say), then ": " and
// err. Retry layers share it, so a give-up reads the same whichever layer gave up; exits appear by
// label, never with credentials.
func FormatGiveUp(head string, fs []FailedAttempt, err error) string {
	var b strings.Builder
	b.WriteString(head)
	if len(fs) > 0 {
		b.WriteString("; failed attempts:")
		permanent := true
		for i, f := range fs {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte(' ')
			b.WriteString(string(f.Verdict.Class))
			b.WriteString(" via ")
			b.WriteString(f.Exit)
			permanent = permanent && f.Verdict.Outcome == Permanent
		}
		if permanent {
			b.WriteString(" (every exit tried failed for good: check the proxies and their credentials)")
		}
	}
	if err != nil {
		b.WriteString(": ")
		b.WriteString(err.Error())
	}
	return b.String()
}

// GiveUpCauses is what an error that gives up on a logical request unwraps to, for errors.Is and
// errors.As: err, then each failed attempt's error (once, if one is err itself).
func GiveUpCauses(err error, fs []FailedAttempt) []error {
	errs := make([]error, 0, 1+len(fs))
	if err != nil {
		errs = append(errs, err)
	}
	for _, f := range fs {
		if f.Err != nil && f.Err != err {
			errs = append(errs, f.Err)
		}
	}
	return errs
}

package testkit

import (
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/proxybreaker/proxybreaker/transport"
)

// CannedReply is one answer a Canned serves. Its Header and Body are shared by every response
// that carries them: neither Canned nor anything downstream may write to them.
type CannedReply struct {
	Status int         // 0 means 200
	Header http.Header // nil means an empty header
	Body   []byte      // nil means an empty body
}

// CannedRule makes a Canned answer the requests When reports true for with Reply. When runs on
// every request, concurrently; for the Canned to stay allocation-free it must not allocate.
type CannedRule struct {
	When  func(*http.Request) bool
	Reply CannedReply
}

// ViaExit returns a CannedRule.When that holds for requests the transport sends through the exit
// labelled label (transport.ExitFromContext). It allocates nothing.
func ViaExit(label string) func(*http.Request) bool {
	return func(req *http.Request) bool {
		e, ok := transport.ExitFromContext(req.Context())
		return ok && e.Label() == label
	}
}

// Canned is a base http.RoundTripper for benchmarks: it answers every request at once, without a
// network, with the reply of the first rule whose When holds, or the default reply. It closes the
// request body, sets resp.Request and never returns an error.
//
// It allocates nothing per request, so that a benchmark over it counts the allocations of the code
// under test and nothing of its own: the response and its body live in one object, taken from a
// sync.Pool for each request and put back when the body is closed, so goroutines of
// b.RunParallel never share one. The cost of that: a caller must be done with the response (its
// status and header included) before it closes the body, and must close it once.
//
// A Canned is safe for concurrent use; make it with NewCanned.
type Canned struct {
	def   cannedReply
	rules []cannedRule
	pool  sync.Pool // of *cannedResponse
}

// cannedReply is a CannedReply with its status line made once, not per request.
type cannedReply struct {
	status int
	line   string // "200 OK"
	header http.Header
	body   []byte
}

type cannedRule struct {
	when  func(*http.Request) bool
	reply cannedReply
}

// cannedResponse is one response in flight and its body, allocated together.
type cannedResponse struct {
	resp http.Response
	body cannedBody
}

// cannedBody reads data from off, and puts its response back into the pool on the first Close.
type cannedBody struct {
	c      *Canned
	r      *cannedResponse
	data   []byte
	off    int
	closed bool
}

var _ http.RoundTripper = (*Canned)(nil)

// NewCanned returns a Canned answering def, except for requests a rule matches (the first match
// wins).
func NewCanned(def CannedReply, rules ...CannedRule) *Canned {
	c := &Canned{def: makeCannedReply(def)}
	for _, r := range rules {
		c.rules = append(c.rules, cannedRule{when: r.When, reply: makeCannedReply(r.Reply)})
	}
	c.pool.New = func() any {
		r := &cannedResponse{}
		r.body.c, r.body.r = c, r
		return r
	}
	return c
}

func makeCannedReply(r CannedReply) cannedReply {
	status := r.Status
	if status == 0 {
		status = http.StatusOK
	}
	h := r.Header
	if h == nil {
		h = http.Header{}
	}
	return cannedReply{status: status, line: fmt.Sprintf("%d %s", status, http.StatusText(status)), header: h, body: r.Body}
}

// RoundTrip implements http.RoundTripper.
func (c *Canned) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	reply := &c.def
	for i := range c.rules {
		if c.rules[i].when != nil && c.rules[i].when(req) {
			reply = &c.rules[i].reply
			break
		}
	}
	r := c.pool.Get().(*cannedResponse)
	r.body.data, r.body.off, r.body.closed = reply.body, 0, false
	r.resp = http.Response{
		Status: reply.line, StatusCode: reply.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: reply.header, Body: &r.body, ContentLength: int64(len(reply.body)), Request: req,
	}
	return &r.resp, nil
}

func (b *cannedBody) Read(p []byte) (int, error) {
	if b.off >= len(b.data) {
		return 0, io.EOF
	}
	n := copy(p, b.data[b.off:])
	b.off += n
	return n, nil
}

func (b *cannedBody) Close() error {
	if !b.closed {
		b.closed = true
		b.c.pool.Put(b.r)
	}
	return nil
}

package transport

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/proxybreaker/proxybreaker/pool"
)

// TestTitleHash: titles that differ only in case, white space or a reference number hash alike;
// a title past the bytes read is not known (0); a whole page without one has the empty title's.
func TestTitleHash(t *testing.T) {
	verify := TitleHash([]byte("<title>Verify you are human</title>"), false)
	empty := TitleHash([]byte("<html><body>nothing</body></html>"), true)
	tests := []struct {
		in       string
		complete bool
		want     uint32
	}{
		{"<html><head><TITLE>  Verify   you\nare HUMAN </TITLE>", false, verify},
		{"<title lang=\"en\">verify you are human</Title>", false, verify},
		{"<html><head><title>Verify you are human", true, verify}, // never closed, but the whole page
		{"<html><head><title>Verify you are human", false, 0},     // may go on past the peek
		{"<html><head><meta charset=utf-8>", false, 0},
		{"<html><body>nothing</body></html>", true, empty},
		{"<titles>x</titles><title>Verify you are human</title>", false, verify},
		{"<title>", false, 0},
		{"<title", true, empty},
		{"", true, empty},
		{"", false, 0},
	}
	for i, tc := range tests {
		if got := TitleHash([]byte(tc.in), tc.complete); got != tc.want {
			t.Errorf("%d: TitleHash(%q, %v) = %#x, want %#x", i, tc.in, tc.complete, got, tc.want)
		}
	}
	ref1 := TitleHash([]byte("<title>Access denied (ref 1234)</title>"), false)
	ref2 := TitleHash([]byte("<title>Access denied (ref 98)</title>"), false)
	if ref1 != ref2 || ref1 == verify {
		t.Errorf("TitleHash: reference numbers %#x, %#x, want equal, and unlike another title %#x", ref1, ref2, verify)
	}
	if a, b := TitleHash([]byte("<title>Widget | Shop</title>"), false), TitleHash([]byte("<title>Gadget | Shop</title>"), false); a == b {
		t.Errorf("TitleHash of two titles = %#x twice, want them apart", a)
	}
}

// TestPageLooksRead: what Read sees of a page, and that the caller still reads the whole body.
func TestPageLooksRead(t *testing.T) {
	page := "<html><head><title>Shop</title></head><body>" + strings.Repeat("x", 20_000) + "</body></html>"
	small := "<html><head><title>Verify</title></head><body>hi</body></html>"
	resp := func(code int, ctype, body string, length int64, method string) *http.Response {
		req, _ := http.NewRequest(method, "http://shop.example/p/123?q=1", nil)
		return &http.Response{StatusCode: code, Header: http.Header{"Content-Type": {ctype}},
			Body: io.NopCloser(strings.NewReader(body)), ContentLength: length, Request: req}
	}
	marker := PageMarker("<body>")
	tests := []struct {
		name string
		pl   PageLooks
		resp *http.Response
		ok   bool
		want pool.Page
	}{
		{"declared length", PageLooks{}, resp(200, "text/html", page, int64(len(page)), "GET"), true,
			pool.Page{Class: pool.PathOf("p"), Size: int64(len(page)), Title: TitleHash([]byte(page), true)}},
		{"chunked, longer than the peek", PageLooks{}, resp(200, "text/html", page, -1, "GET"), true,
			pool.Page{Class: pool.PathOf("p"), Size: DefaultPageLookPeek, AtLeast: true, Title: TitleHash([]byte(page), true)}},
		{"chunked, read whole", PageLooks{Check: marker}, resp(200, "text/html", small, -1, "GET"), true,
			pool.Page{Class: pool.PathOf("p"), Size: int64(len(small)), Title: TitleHash([]byte(small), true), Mark: pool.PageReal}},
		{"marker missing from a whole page", PageLooks{Check: PageMarker("add-to-cart")}, resp(200, "text/html", small, -1, "GET"), true,
			pool.Page{Class: pool.PathOf("p"), Size: int64(len(small)), Title: TitleHash([]byte(small), true), Mark: pool.PageNotReal}},
		{"marker maybe past the peek", PageLooks{Peek: 64, Check: PageMarker("add-to-cart")}, resp(200, "text/html", page, -1, "GET"), true,
			pool.Page{Class: pool.PathOf("p"), Size: 64, AtLeast: true, Title: TitleHash([]byte(page), true)}},
		{"caller's class", PageLooks{Class: func(r *http.Request) string { return r.URL.RawQuery }}, resp(200, "text/html", small, int64(len(small)), "GET"), true,
			pool.Page{Class: pool.PathOf("q=1"), Size: int64(len(small)), Title: TitleHash([]byte(small), true)}},
		{"not html", PageLooks{}, resp(200, "application/json", small, -1, "GET"), false, pool.Page{}},
		{"HEAD", PageLooks{}, resp(200, "text/html", "", 5000, "HEAD"), false, pool.Page{}},
		{"206", PageLooks{}, resp(206, "text/html", small, -1, "GET"), false, pool.Page{}},
		{"404", PageLooks{}, resp(404, "text/html", small, -1, "GET"), false, pool.Page{}},
		{"off", PageLooks{Peek: -1}, resp(200, "text/html", small, -1, "GET"), false, pool.Page{}},
	}
	for _, tc := range tests {
		r := tc.resp
		want, _ := io.ReadAll(io.NopCloser(r.Body))
		r.Body = io.NopCloser(bytes.NewReader(want))
		got, ok, err := tc.pl.Read(r)
		if err != nil || ok != tc.ok || got != tc.want {
			t.Errorf("%s: Read = %+v, %v, %v; want %+v, %v, nil", tc.name, got, ok, err, tc.want, tc.ok)
		}
		if body, err := io.ReadAll(r.Body); err != nil || !bytes.Equal(body, want) {
			t.Errorf("%s: the caller read %d bytes (%v), want the %d of the body", tc.name, len(body), err, len(want))
		}
	}

	// A body that breaks during the peek: the error, and the caller reads the same bytes and error.
	boom := errors.New("boom")
	r := resp(200, "text/html", "", -1, "GET")
	r.Body = io.NopCloser(io.MultiReader(strings.NewReader("<html><title>x"), iotest.ErrReader(boom)))
	if _, ok, err := (&PageLooks{}).Read(r); !ok || !errors.Is(err, boom) {
		t.Errorf("broken body: Read = %v, %v; want true, %v", ok, err, boom)
	}
	if body, err := io.ReadAll(r.Body); string(body) != "<html><title>x" || !errors.Is(err, boom) {
		t.Errorf("broken body: the caller read %q, %v; want the prefix, then %v", body, err, boom)
	}
}

// FuzzTitleHash: the title parser never panics, never reads past its input, agrees with a plain
// reading of where the title ends, and hashes inputs that differ after the title's end alike.
func FuzzTitleHash(f *testing.F) {
	for _, s := range []string{"<title>Verify you are human</title>", "<TITLE x=1>a  b 12</TITLE><p>", "<title", "<title>",
		"<titles><title>x", "", "\x00<title>\xff</title>"} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, b []byte, complete bool) {
		h := TitleHash(b, complete)
		if !complete && h != 0 {
			// A title known from a prefix stays the same whatever follows it.
			if h2 := TitleHash(append(bytes.Clone(b), "</title>junk<title>other</title>"...), complete); h2 != h {
				t.Errorf("TitleHash(%q) = %#x, with more after it %#x", b, h, h2)
			}
		}
		if complete && h == 0 {
			t.Errorf("TitleHash(%q, complete) = 0, want a hash", b)
		}
		pl := PageLooks{Peek: 1 + len(b)%64, Check: PageMarker("<body")}
		resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/html"}},
			Body: io.NopCloser(bytes.NewReader(b)), ContentLength: -1}
		if _, _, err := pl.Read(resp); err != nil {
			t.Fatal(err)
		}
		if got, _ := io.ReadAll(resp.Body); !bytes.Equal(got, b) {
			t.Errorf("after Read the body is %q, want %q", got, b)
		}
	})
}

// BenchmarkPageLooksRead: what the check costs a 2xx HTML page, the read of its look (the peek
// and its buffer, the title) beside reading the body whole, which the caller does anyway.
func BenchmarkPageLooksRead(b *testing.B) {
	page := []byte("<!doctype html><html><head><title>Widget 4711 | Shop</title></head><body>" + strings.Repeat("<li>spec</li>\n", 3000) + "</body></html>")
	for _, bc := range []struct {
		name string
		read bool
	}{{"body only", false}, {"look and body", true}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(page)))
			var pl PageLooks
			for b.Loop() {
				resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/html"}},
					Body: io.NopCloser(struct{ io.Reader }{bytes.NewReader(page)}), ContentLength: int64(len(page))} // no WriteTo, as net/http's body
				if bc.read {
					if _, ok, err := pl.Read(resp); !ok || err != nil {
						b.Fatal(ok, err)
					}
				}
				io.Copy(io.Discard, resp.Body)
			}
		})
	}
}

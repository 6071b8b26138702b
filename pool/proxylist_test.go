package pool

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// listSecret is the password the proxy-list tests use.
const listSecret = "s3cr3t-PW"

type listWant struct {
	label  string
	tier   int
	weight float64
	host   string // ProxyURL().Host
	pass   string
}

func listCheck(t *testing.T, name string, got []*Exit, want []listWant) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: ReadExits = %d exits %v, want %d", name, len(got), got, len(want))
	}
	for i, w := range want {
		e := got[i]
		u := e.ProxyURL()
		pass := ""
		if u.User != nil {
			pass, _ = u.User.Password()
		}
		if e.Label() != w.label || e.Tier() != w.tier || e.Weight() != w.weight || u.Host != w.host || pass != w.pass {
			t.Errorf("%s: ReadExits[%d] = %q tier %d weight %v host %q pass %q, want %q tier %d weight %v host %q pass %q",
				name, i, e.Label(), e.Tier(), e.Weight(), u.Host, pass, w.label, w.tier, w.weight, w.host, w.pass)
		}
	}
}

func TestReadExits(t *testing.T) {
	in := `# datacenter pool
http://user:s3cr3t-PW@dc1.example:8080  label=dc-1 tier=0 weight=2

   # indented comment
	socks5h://dc2.example	tier=0
res.example:7777:user-session-42:s3cr3t-PW  tier=1
res.example:7778:user:s3:cr@t#PW tier=1 weight=0.5 label=res-2
[::1]:3128

user:s3cr3t-PW@plain.example   
HTTPS://tls.example label=tls tier=2 tier=3
`
	exits, err := ReadExits(strings.NewReader(in))
	if err != nil {
		t.Fatalf("ReadExits = error %v, want nil", err)
	}
	listCheck(t, "list", exits, []listWant{
		{label: "dc-1", weight: 2, host: "dc1.example:8080", pass: listSecret},
		{label: "socks5h://dc2.example:1080", weight: 1, host: "dc2.example:1080"},
		{label: "http://user-session-42:xxxxx@res.example:7777", tier: 1, weight: 1, host: "res.example:7777", pass: listSecret},
		{label: "res-2", tier: 1, weight: 0.5, host: "res.example:7778", pass: "s3:cr@t#PW"},
		{label: "http://[::1]:3128", weight: 1, host: "[::1]:3128"},
		{label: "http://user:xxxxx@plain.example:80", weight: 1, host: "plain.example:80", pass: listSecret},
		{label: "tls", tier: 3, weight: 1, host: "tls.example:443"}, // the last tier= wins
	})
}

func TestReadExitsEmpty(t *testing.T) {
	for _, in := range []string{"", "\n\n", "# only a comment\n", "   \n\t# x\n", "#http://user:s3cr3t-PW@bad:0"} {
		exits, err := ReadExits(strings.NewReader(in))
		if err != nil || len(exits) != 0 {
			t.Errorf("ReadExits(%q) = %v, %v, want no exits, nil", in, exits, err)
		}
	}
}

func TestReadExitsErrors(t *testing.T) {
	tests := []struct {
		in   string
		want []string // substrings of the error
	}{
		{"ftp://user:s3cr3t-PW@a.example:21", []string{`line 1: field 1: proxy "ftp://user:xxxxx@a.example:21": scheme "ftp"`}},
		{"# pool\n\nok.example:80\nbad.example:0:user:s3cr3t-PW\n", []string{`line 4: field 1: proxy "bad.example:0:user:xxxxx": bad port "0"`}},
		{"a.example:80 tier=x", []string{`line 1: proxy http://a.example:80: field 2: tier "x": want an integer`}},
		{"a.example:80 tier=1.5", []string{"line 1:", `tier "1.5"`}},
		{"a.example:80 weight=0", []string{"line 1:", `weight "0": want a positive number`}},
		{"a.example:80 weight=-1", []string{"line 1:", `weight "-1"`}},
		{"a.example:80 weight=Inf", []string{"line 1:", `weight "Inf"`}},
		{"a.example:80 weight=+Inf", []string{"line 1:", `weight "+Inf"`}},
		{"a.example:80 weight=NaN", []string{"line 1:", `weight "NaN"`}},
		{"a.example:80 weight=heavy", []string{"line 1:", `weight "heavy"`}},
		{"a.example:80 label=", []string{"line 1:", "empty label"}},
		{"a.example:80 Color=red", []string{"line 1: proxy http://a.example:80: field 2: attribute key \"Color\": want a lower-case letter first"}},
		{"a.example:80 Tier=1", []string{"line 1:", "field 2:", "close to tier (a typo?)"}},
		{"a.example:80 wieght=2", []string{"field 2:", "close to weight (a typo?)"}},
		{"a.example:80 country=us country=ca", []string{"field 3: attribute country given twice"}},
		{"a.example:80 city=new york", []string{"field 3: want key=value"}},
		{"a.example:80 city=a,b", []string{"field 2: attribute city: value \"a,b\": byte 2 (',')"}},
		{"a.example:80 dc", []string{"line 1:", "field 2: want key=value"}},
		{"a.example:80:user:s3cr3t-PW   tier=1 oops", []string{"line 1: proxy http://user:xxxxx@a.example:80: field 3: want key=value"}},
		// A password with a space: its tail must not be echoed.
		{"a.example:80:user:s3cr3t PW-tail", []string{"line 1:", "field 2: want key=value"}},
		{"a.example:80:user:s3cr3t-PW label=dc-9 tier=x", []string{"line 1: proxy dc-9: field 3: tier \"x\""}},
		{"http://user:s3cr3t-PW@a.example:80/path", []string{"line 1:", "no path, query or fragment"}},
		{"user:s3cr3t-PW@a.example:99999 label=x", []string{"line 1:", `bad port "99999"`}},
		{"ok.example:80\n  \nhttp://user:s3cr3t-PW@ bad.example", []string{"line 3:", "missing host"}},
		{"ok.example:80\nhttp://user:s3cr3t-PW@bad%zz.example", []string{"line 2:", "malformed URL"}},
	}
	for i, tt := range tests {
		exits, err := ReadExits(strings.NewReader(tt.in))
		if err == nil {
			t.Errorf("%d: ReadExits(%q) = %v, nil, want an error", i, tt.in, exits)
			continue
		}
		if exits != nil {
			t.Errorf("%d: ReadExits(%q) = %v, %v, want nil exits with the error", i, tt.in, exits, err)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "pool: proxy list: ") {
			t.Errorf("%d: ReadExits(%q) = error %q, want the prefix %q", i, tt.in, msg, "pool: proxy list: ")
		}
		if n := strings.Count(msg, "pool:"); n != 1 {
			t.Errorf("%d: ReadExits(%q) = error %q: %d package prefixes, want 1", i, tt.in, msg, n)
		}
		for _, w := range tt.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%d: ReadExits(%q) = error %q, want it to contain %q", i, tt.in, msg, w)
			}
		}
		for _, piece := range []string{listSecret, "s3cr3t", "PW-tail"} {
			if strings.Contains(msg, piece) {
				t.Errorf("%d: ReadExits(%q) = error %q: shows the password", i, tt.in, msg)
			}
		}
	}
}

func TestReadExitsReportsAtMostTenErrors(t *testing.T) {
	var b strings.Builder
	b.WriteString("good.example:80\n")
	for i := 2; i <= 26; i++ {
		fmt.Fprintf(&b, "bad%d.example:0:user:%s\n", i, listSecret)
	}
	exits, err := ReadExits(strings.NewReader(b.String()))
	if err == nil {
		t.Fatalf("ReadExits(25 bad lines) = %v, nil, want an error", exits)
	}
	msg := err.Error()
	lines := regexp.MustCompile(`line (\d+):`).FindAllStringSubmatch(msg, -1)
	if len(lines) != maxListErrors {
		t.Errorf("ReadExits(25 bad lines) reported %d lines, want %d: %q", len(lines), maxListErrors, msg)
	}
	for i, m := range lines {
		if want := fmt.Sprint(i + 2); m[1] != want {
			t.Errorf("ReadExits(25 bad lines) error %d names line %s, want line %s", i, m[1], want)
		}
	}
	if strings.Contains(msg, listSecret) || strings.Contains(msg, "s3cr3t") {
		t.Errorf("ReadExits(25 bad lines) = error %q: shows the password", msg)
	}
}

// Regression: a 5 MiB line gave "after line 0: bufio.Scanner: token too long", naming neither
// the line nor the limit, and ended the reading there.
func TestReadExitsLineTooLong(t *testing.T) {
	long := func(n int) string { return "b.example:80:user:" + listSecret + strings.Repeat("x", n) }
	tests := []struct {
		name string
		in   string
		want []string // substrings of the error, in order
	}{
		{"5 MiB first line", long(5 << 20), []string{"line 1: longer than 65536 bytes"}},
		{"1 MiB line between good ones", "a.example:80\n" + long(1<<20) + "\nc.example:80\n",
			[]string{"line 2: longer than 65536 bytes"}},
		// Reading goes on after a long line: later bad lines are reported with their own numbers.
		{"bad lines after long ones", long(maxListLine) + "\r\nok.example:80\n" + long(3*maxListLine) + "\nbad.example:0:user:" + listSecret + "\n",
			[]string{"line 1: longer than 65536 bytes", "line 3: longer than 65536 bytes", `line 4: field 1: proxy "bad.example:0:user:xxxxx": bad port "0"`}},
		{"long comment", "# " + strings.Repeat(listSecret, maxListLine/len(listSecret)+1) + "\nok.example:80\n",
			[]string{"line 1: longer than 65536 bytes"}},
		{"long last line without a newline", "ok.example:80\n" + long(maxListLine), []string{"line 2: longer than 65536 bytes"}},
	}
	for _, tt := range tests {
		exits, err := ReadExits(strings.NewReader(tt.in))
		if err == nil {
			t.Errorf("%s: ReadExits = %d exits, nil, want an error", tt.name, len(exits))
			continue
		}
		if exits != nil {
			t.Errorf("%s: ReadExits = %d exits with error %v, want none", tt.name, len(exits), err)
		}
		msg := err.Error()
		rest := msg
		for _, w := range tt.want {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Errorf("%s: ReadExits = error %q, want it to contain %q (in order)", tt.name, msg, w)
				break
			}
			rest = rest[i+len(w):]
		}
		if n := len(regexp.MustCompile(`line \d+:`).FindAllString(msg, -1)); n != len(tt.want) {
			t.Errorf("%s: ReadExits = error %q naming %d lines, want %d", tt.name, msg, n, len(tt.want))
		}
		if strings.Contains(msg, "s3cr3t") || strings.Contains(msg, "xxxxxxxx") || len(msg) > 400 {
			t.Errorf("%s: ReadExits = error %q, want a short error without the line's text", tt.name, msg[:min(len(msg), 400)])
		}
	}
}

// A line of exactly the limit is read, with either line ending or none; a byte more is refused.
func TestReadExitsLineAtLimit(t *testing.T) {
	const head = "b.example:80:user:"
	pass := strings.Repeat("p", maxListLine-len(head))
	if exits, err := ReadExits(strings.NewReader(head + pass)); err != nil || len(exits) != 1 {
		t.Errorf("ReadExits(one %d-byte line without a newline) = %d exits, %v, want 1, nil", maxListLine, len(exits), err)
	}
	for _, end := range []string{"\n", "\r\n"} {
		in := "a.example:80\n" + head + pass + end + "c.example:80" + end
		exits, err := ReadExits(strings.NewReader(in))
		if err != nil {
			t.Errorf("ReadExits(a %d-byte line ending %q) = error %v, want nil", maxListLine, end, err)
			continue
		}
		if len(exits) != 3 {
			t.Fatalf("ReadExits(a %d-byte line ending %q) = %d exits, want 3", maxListLine, end, len(exits))
		}
		if got, _ := exits[1].ProxyURL().User.Password(); got != pass {
			t.Errorf("ReadExits(a %d-byte line ending %q): password of %d bytes, want %d", maxListLine, end, len(got), len(pass))
		}
		if h := exits[2].ProxyURL().Host; h != "c.example:80" {
			t.Errorf("ReadExits(a %d-byte line ending %q): third exit %q, want c.example:80", maxListLine, end, h)
		}
		over := "a.example:80" + end + head + pass + "p" + end
		if end == "\n" {
			over = over[:len(over)-1] // the last line without its newline: the end of the input ends it
		}
		if _, err := ReadExits(strings.NewReader(over)); err == nil || !strings.Contains(err.Error(), "line 2: longer than 65536 bytes") {
			t.Errorf("ReadExits(a %d-byte line ending %q) = %v, want a line 2 too long error", maxListLine+1, end, err)
		}
	}
}

func TestReadExitsCRLF(t *testing.T) {
	exits, err := ReadExits(strings.NewReader("a.example:80:user:" + listSecret + "\r\nb.example:81 tier=2\r\n"))
	if err != nil {
		t.Fatalf("ReadExits(CRLF) = error %v, want nil", err)
	}
	listCheck(t, "crlf", exits, []listWant{
		{label: "http://user:xxxxx@a.example:80", weight: 1, host: "a.example:80", pass: listSecret},
		{label: "http://b.example:81", tier: 2, weight: 1, host: "b.example:81"},
	})
}

// Regression: a bad proxy field read "line 2: pool: proxy "not": …", the package prefix twice,
// and quoted the line's first word without saying it was the proxy field that was wrong.
func TestReadExitsErrorPerLineNamesTheField(t *testing.T) {
	in := "ok.example:80\nnot a proxy\nb.example:80:user:" + listSecret + " tier=1 weight=x\n"
	_, err := ReadExits(strings.NewReader(in))
	if err == nil {
		t.Fatal("ReadExits(two bad lines) = nil error, want one")
	}
	want := "pool: proxy list: line 2: field 1: proxy \"not\": want host:port or host:port:user:pass\n" +
		"line 3: proxy http://user:xxxxx@b.example:80: field 3: weight \"x\": want a positive number"
	if got := err.Error(); got != want {
		t.Errorf("ReadExits(two bad lines) = error\n%s\nwant\n%s", got, want)
	}
}

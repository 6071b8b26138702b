package pool

import (
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// TestOriginPatternMatching: which pattern an origin key gets, most specific first, and what the
// chain of patterns layers into its settings.
func TestOriginPatternMatching(t *testing.T) {
	p, err := New(
		WithOriginSettings("*", OriginSettings{Pair: breaker.Settings{FailureThreshold: 7}, Suspect: SuspectOff}),
		WithOriginSettings("*.Shop.Example", OriginSettings{Pair: breaker.Settings{BaseCooldown: time.Minute}, Suspect: SuspectBan}),
		WithOriginSettings("*.eu.shop.example", OriginSettings{Pair: breaker.Settings{Window: 2 * time.Minute}}),
		WithOriginSettings("api.shop.example", OriginSettings{Pair: breaker.Settings{MaxCooldown: time.Hour}, Suspect: SuspectEvidence}),
		WithOriginSettings("api.shop.example:8443", OriginSettings{Pair: breaker.Settings{FailureThreshold: 1}}),
		WithOriginSettings("[::1]:8080", OriginSettings{Guard: OriginGuardSettings{MinExits: 5}}),
	)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key      string
		pattern  string // "" for none
		failures int
		base     time.Duration
		window   time.Duration
		maxCool  time.Duration
		suspect  SuspectPolicy
		minExits int
	}{
		{"news.example", "*", 7, breaker.DefaultBaseCooldown, breaker.DefaultWindow, breaker.DefaultMaxCooldown, SuspectOff, DefaultGuardMinExits},
		{"shop.example", "*", 7, breaker.DefaultBaseCooldown, breaker.DefaultWindow, breaker.DefaultMaxCooldown, SuspectOff, DefaultGuardMinExits},
		{"www.shop.example", "*.shop.example", 7, time.Minute, breaker.DefaultWindow, breaker.DefaultMaxCooldown, SuspectBan, DefaultGuardMinExits},
		{"A.B.SHOP.EXAMPLE:81", "*.shop.example", 7, time.Minute, breaker.DefaultWindow, breaker.DefaultMaxCooldown, SuspectBan, DefaultGuardMinExits},
		{"x.eu.shop.example", "*.eu.shop.example", 7, time.Minute, 2 * time.Minute, breaker.DefaultMaxCooldown, SuspectBan, DefaultGuardMinExits},
		{"eu.shop.example", "*.shop.example", 7, time.Minute, breaker.DefaultWindow, breaker.DefaultMaxCooldown, SuspectBan, DefaultGuardMinExits},
		{"api.shop.example", "api.shop.example", 7, time.Minute, breaker.DefaultWindow, time.Hour, SuspectEvidence, DefaultGuardMinExits},
		{"api.shop.example:9000", "api.shop.example", 7, time.Minute, breaker.DefaultWindow, time.Hour, SuspectEvidence, DefaultGuardMinExits},
		{"api.shop.example:8443", "api.shop.example:8443", 1, time.Minute, breaker.DefaultWindow, time.Hour, SuspectEvidence, DefaultGuardMinExits},
		{"[::1]:8080", "[::1]:8080", 7, breaker.DefaultBaseCooldown, breaker.DefaultWindow, breaker.DefaultMaxCooldown, SuspectOff, 5},
		{"[::1]:8081", "*", 7, breaker.DefaultBaseCooldown, breaker.DefaultWindow, breaker.DefaultMaxCooldown, SuspectOff, DefaultGuardMinExits},
		{"not a host key", "*", 7, breaker.DefaultBaseCooldown, breaker.DefaultWindow, breaker.DefaultMaxCooldown, SuspectOff, DefaultGuardMinExits},
	}
	for i, tt := range tests {
		r := p.ruleFor(tt.key)
		if r == nil || r.pattern != tt.pattern {
			t.Errorf("%d: ruleFor(%q) = %v, want pattern %q", i, tt.key, r, tt.pattern)
			continue
		}
		s := r.pairPol.Settings()
		if s.FailureThreshold != tt.failures || s.BaseCooldown != tt.base || s.Window != tt.window || s.MaxCooldown != tt.maxCool {
			t.Errorf("%d: ruleFor(%q) pair settings = failures %d, base %v, window %v, max %v; want %d, %v, %v, %v",
				i, tt.key, s.FailureThreshold, s.BaseCooldown, s.Window, s.MaxCooldown, tt.failures, tt.base, tt.window, tt.maxCool)
		}
		if r.guard.suspect != tt.suspect || r.guard.MinExits != tt.minExits {
			t.Errorf("%d: ruleFor(%q) suspect, guard MinExits = %v, %d; want %v, %d", i, tt.key, r.guard.suspect, r.guard.MinExits, tt.suspect, tt.minExits)
		}
		if o := p.liveOrigin(tt.key); o.rule != r || o.guard.cfg != &r.guard {
			t.Errorf("%d: origin %q keeps rule %v, guard config %p; want %v, %p", i, tt.key, o.rule, o.guard.cfg, r, &r.guard)
		}
	}

	plain, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if r := plain.ruleFor("shop.example"); r != nil {
		t.Errorf("ruleFor without patterns = %v, want nil", r)
	}
	if o := plain.liveOrigin("shop.example"); o.guard.cfg != &plain.guard || plain.guard.suspect != SuspectEvidence {
		t.Errorf("origin without patterns: guard config %p, suspect %v; want the pool's, evidence", o.guard.cfg, plain.guard.suspect)
	}
}

// TestWithOriginSettingsErrors: a bad pattern, or settings that cannot be, is an error from New
// that names the pattern.
func TestWithOriginSettingsErrors(t *testing.T) {
	tests := []struct {
		opts []Option
		want []string
	}{
		{[]Option{WithOriginSettings("", OriginSettings{})}, []string{`WithOriginSettings("")`, "empty pattern"}},
		{[]Option{WithOriginSettings("shop*.example", OriginSettings{})}, []string{`"shop*.example"`, "first label"}},
		{[]Option{WithOriginSettings("*.*.example", OriginSettings{})}, []string{`"*.*.example"`, "first label"}},
		{[]Option{WithOriginSettings("*.", OriginSettings{})}, []string{`"*."`, "domain after"}},
		{[]Option{WithOriginSettings("*.shop.example:443", OriginSettings{})}, []string{"every port"}},
		{[]Option{WithOriginSettings("https://shop.example", OriginSettings{})}, []string{"not a URL"}},
		{[]Option{WithOriginSettings("shop.example:", OriginSettings{})}, []string{"empty port"}},
		{[]Option{WithOriginSettings("shop.example", OriginSettings{}), WithOriginSettings("SHOP.example", OriginSettings{})}, []string{`"SHOP.example"`, "twice"}},
		{[]Option{WithOriginSettings("shop.example", OriginSettings{Suspect: 9})}, []string{"unknown Suspect policy 9"}},
		{[]Option{WithOriginSettings("shop.example", OriginSettings{Pair: breaker.Settings{FailureThreshold: -1}})},
			[]string{`WithOriginSettings("shop.example"): pair settings`, "FailureThreshold"}},
		// Valid alone, not over the pattern it inherits from: the error names the inheritor.
		{[]Option{
			WithOriginSettings("*.shop.example", OriginSettings{Pair: breaker.Settings{BaseCooldown: time.Hour}}),
			WithOriginSettings("api.shop.example", OriginSettings{Pair: breaker.Settings{MaxCooldown: time.Minute}}),
		}, []string{`WithOriginSettings("api.shop.example")`, "MaxCooldown"}},
		{[]Option{WithOriginSettings("*", OriginSettings{Guard: OriginGuardSettings{Share: 2}})}, []string{`WithOriginSettings("*")`, "Share"}},
	}
	for i, tt := range tests {
		_, err := New(tt.opts...)
		if err == nil {
			t.Errorf("%d: New = nil error, want one containing %q", i, tt.want)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%d: New = %q, want it to contain %q", i, err, w)
			}
		}
	}
}

// TestSplitOriginKey covers the key forms transport.OriginFunc makes, and keys that are not
// host[:port].
func TestSplitOriginKey(t *testing.T) {
	tests := []struct{ key, host, port string }{
		{"shop.example", "shop.example", ""},
		{"shop.example:8443", "shop.example", "8443"},
		{"[::1]:8080", "[::1]", "8080"},
		{"[::1]", "[::1]", ""},
		{"::1", "::1", ""},
		{"a:b:c", "a:b:c", ""},
		{"shop.example:http", "shop.example:http", ""},
		{"", "", ""},
	}
	for _, tt := range tests {
		if h, p := splitOriginKey(tt.key); h != tt.host || p != tt.port {
			t.Errorf("splitOriginKey(%q) = %q, %q, want %q, %q", tt.key, h, p, tt.host, tt.port)
		}
	}
}

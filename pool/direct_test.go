package pool_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// TestDirectExit: DirectExit and the word "direct" make the same exit — no proxy URL, labelled
// "direct", tier 0, weight 1 — which the With methods treat as any exit's.
func TestDirectExit(t *testing.T) {
	for _, raw := range []string{"direct", "DIRECT", "  Direct\t"} {
		e, err := pool.ParseExit(raw)
		if err != nil {
			t.Fatalf("ParseExit(%q) = %v, want a direct exit", raw, err)
		}
		if !e.Direct() || e.Scheme() != pool.SchemeDirect || e.Label() != "direct" || e.Tier() != 0 || e.Weight() != 1 {
			t.Errorf("ParseExit(%q) = direct %v scheme %q label %q tier %d weight %v, want direct, %q, %q, 0, 1",
				raw, e.Direct(), e.Scheme(), e.Label(), e.Tier(), e.Weight(), pool.SchemeDirect, "direct")
		}
		if u := e.ProxyURL(); u != nil {
			t.Errorf("ParseExit(%q).ProxyURL() = %v, want nil", raw, u)
		}
	}
	d := pool.DirectExit()
	home := d.WithLabel("home").WithTier(2).WithWeight(3).WithAttr("kind", "direct")
	if !home.Direct() || home.Label() != "home" || home.Tier() != 2 || home.Weight() != 3 || d.Label() != "direct" {
		t.Errorf("DirectExit().With… = direct %v %q tier %d weight %v (original %q), want direct home 2 3 (direct)",
			home.Direct(), home.Label(), home.Tier(), home.Weight(), d.Label())
	}
	if got := home.WithLabel("").Label(); got != "direct" {
		t.Errorf("direct WithLabel(%q).Label() = %q, want %q", "", got, "direct")
	}
	if got := home.GoString(); got != `pool.Exit("home")` {
		t.Errorf("direct GoString() = %s, want pool.Exit(\"home\")", got)
	}
	b, err := json.Marshal(home)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"label":"home","tier":2,"weight":3,"direct":true}`; string(b) != want {
		t.Errorf("json.Marshal(direct exit) = %s, want %s", b, want)
	}
	b, _ = json.Marshal(pool.MustParseExit("10.0.0.1:3128"))
	if strings.Contains(string(b), "direct") {
		t.Errorf("json.Marshal(proxy exit) = %s, want no direct field", b)
	}
	if p := pool.MustParseExit("10.0.0.1:3128"); p.Direct() {
		t.Errorf("MustParseExit(10.0.0.1:3128).Direct() = true, want false")
	}
}

// TestDirectExitIsTheWordAlone: a URL cannot name a direct exit, and a host named "direct" with a
// port is a proxy like any other.
func TestDirectExitIsTheWordAlone(t *testing.T) {
	for _, raw := range []string{"direct://", "direct://home", "DIRECT://user:s3cr3t-PW@host:80"} {
		_, err := pool.ParseExit(raw)
		if err == nil || !strings.Contains(err.Error(), `is the word "direct" alone`) {
			t.Errorf("ParseExit(%q) = %v, want an error saying a direct exit is the word alone", raw, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t-PW") {
			t.Errorf("ParseExit(%q) error %q shows the password", raw, err)
		}
	}
	if _, err := pool.NewExit(&url.URL{Scheme: "direct"}); err == nil || !strings.Contains(err.Error(), "pool.DirectExit") {
		t.Errorf("NewExit(direct:) = %v, want an error pointing at pool.DirectExit", err)
	}
	e, err := pool.ParseExit("direct:8080")
	if err != nil || e.Direct() || e.ProxyURL().Host != "direct:8080" {
		t.Errorf("ParseExit(%q) = %v, %v, want the proxy at host direct, port 8080", "direct:8080", e, err)
	}
}

// TestReadExitsDirect: "direct" lines take the list's fields and attributes like any proxy's; a
// malformed one is an error naming its line and field.
func TestReadExitsDirect(t *testing.T) {
	in := `# start direct, escalate to proxies per origin
direct tier=0 label=home
DIRECT label=office weight=2 country=us
http://user:s3cr3t-PW@dc1.example:8080 tier=1 label=dc-1
`
	exits, err := pool.ReadExits(strings.NewReader(in))
	if err != nil {
		t.Fatalf("ReadExits = %v", err)
	}
	if len(exits) != 3 {
		t.Fatalf("ReadExits = %v, want 3 exits", exits)
	}
	home, office, dc := exits[0], exits[1], exits[2]
	if !home.Direct() || home.Label() != "home" || home.Tier() != 0 {
		t.Errorf("line 2 = direct %v %q tier %d, want direct home tier 0", home.Direct(), home.Label(), home.Tier())
	}
	if c, _ := office.Attr("country"); !office.Direct() || office.Label() != "office" || office.Weight() != 2 || c != "us" {
		t.Errorf("line 3 = direct %v %q weight %v country %q, want direct office 2 us", office.Direct(), office.Label(), office.Weight(), c)
	}
	if dc.Direct() || dc.Tier() != 1 {
		t.Errorf("line 4 = direct %v tier %d, want a proxy in tier 1", dc.Direct(), dc.Tier())
	}
	if _, err := pool.New(pool.WithExits(exits...)); err != nil {
		t.Errorf("pool.New(direct exits and a proxy) = %v", err)
	}

	for _, tt := range []struct{ in, want string }{
		{"ok.example:80\ndirect tier=x\n", `line 2: proxy direct: field 2: tier "x": want an integer`},
		{"direct home\n", "line 1: proxy direct: field 2: want key=value"},
		{"\n\ndirect://home label=home\n", `line 3: field 1: proxy "direct://home": a direct exit is the word "direct" alone`},
		{"direct label=home wieght=2\n", `line 1: proxy home: field 3: "wieght": not an attribute this close to weight`},
	} {
		_, err := pool.ReadExits(strings.NewReader(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ReadExits(%q) = %v, want an error containing %q", tt.in, err, tt.want)
		}
	}
	// Two direct exits need labels of their own, as any two exits do.
	twice, err := pool.ReadExits(strings.NewReader("direct\ndirect\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.New(pool.WithExits(twice...)); err == nil || !strings.Contains(err.Error(), `duplicate exit label "direct"`) {
		t.Errorf("pool.New(two unlabelled direct exits) = %v, want a duplicate label error", err)
	}
}

// TestSyncDirect: a reloaded list keeps a direct exit that did not change (its breakers too),
// updates one whose tier changed, and replaces a label that moved between a proxy and direct.
func TestSyncDirect(t *testing.T) {
	p, _ := newSyncPool(t, nil, pool.DirectExit().WithLabel("home"), syncExit("dc", 1, 1, 1))
	pickVia(t, p, "home", "shop").Report(failVerdict)
	if ps, ok := pairStatus(p, "home", "shop"); !ok || ps.Breaker.State != breaker.Open {
		t.Fatalf("(home, shop) after a failure = %+v, want open", ps)
	}
	res, err := p.Sync([]*pool.Exit{pool.DirectExit().WithLabel("home"), syncExit("dc", 1, 1, 1)})
	if err != nil || res.Kept != 2 || res.Changed() {
		t.Fatalf("Sync(same list) = %v, %v, want 2 kept and nothing else", res, err)
	}
	res, err = p.Sync([]*pool.Exit{pool.DirectExit().WithLabel("home").WithTier(1), syncExit("dc", 1, 1, 1)})
	if err != nil || res.Updated != 1 || res.Kept != 1 {
		t.Fatalf("Sync(home to tier 1) = %v, %v, want 1 updated, 1 kept", res, err)
	}
	if ps, ok := pairStatus(p, "home", "shop"); !ok || ps.Breaker.State != breaker.Open {
		t.Errorf("(home, shop) after updating home's tier = %+v, want still open", ps)
	}
	// "dc" becomes direct and "home" a proxy: both labels now name other exits, fresh.
	res, err = p.Sync([]*pool.Exit{syncExit("home", 2, 1, 1), pool.DirectExit().WithLabel("dc")})
	if err != nil || res.Replaced != 2 {
		t.Fatalf("Sync(swap direct and proxy) = %v, %v, want 2 replaced", res, err)
	}
	if ps, ok := pairStatus(p, "home", "shop"); ok && ps.Breaker.State != breaker.Closed {
		t.Errorf("(home, shop) after home became a proxy = %+v, want forgotten or closed", ps)
	}
	got := map[string]bool{}
	for _, e := range p.Exits() {
		got[e.Label()] = e.Direct()
	}
	if !got["dc"] || got["home"] {
		t.Errorf("exits after the swap: direct = %v, want dc direct and home not", got)
	}
}

// TestDirectTierEscalatesPerOrigin: a direct exit in tier 0 serves every origin until one blocks
// it; that origin goes to the proxy in tier 1 while the others stay direct.
func TestDirectTierEscalatesPerOrigin(t *testing.T) {
	p, _ := newSyncPool(t, nil, pool.DirectExit(), syncExit("dc", 1, 1, 1))
	for _, origin := range []string{"shop", "news"} {
		l := mustPick(t, p, origin)
		if !l.Exit().Direct() {
			t.Fatalf("first pick for %s = %v, want direct", origin, l.Exit())
		}
		l.Report(okVerdict)
	}
	blocked := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked}
	pickVia(t, p, "direct", "shop").Report(blocked)
	for i := range 5 {
		s := mustPick(t, p, "shop")
		n := mustPick(t, p, "news")
		if s.Exit().Label() != "dc" || !n.Exit().Direct() {
			t.Fatalf("pick %d after shop blocked direct: shop via %v, news via %v, want dc and direct", i, s.Exit(), n.Exit())
		}
		s.Report(okVerdict)
		n.Report(okVerdict)
	}
}

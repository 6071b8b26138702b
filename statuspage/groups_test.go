package statuspage_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/statuspage"
)

// TestGroupsHeld: a group held for an origin shows in the JSON table and on the page, its labels
// escaped; a pool holding nothing shows an empty list and no section.
func TestGroupsHeld(t *testing.T) {
	s := snapshot
	s.Groups = []pool.GroupHold{{
		Group: "203.0.113.0/24", Origin: "shop.example", Since: t0.Add(-time.Minute),
		Banned: []string{"s0", "s1"}, Held: []string{"s2", "s3<script>"}, Probing: true,
	}}
	h, err := statuspage.New(fixed(s))
	if err != nil {
		t.Fatal(err)
	}
	resp := serve(t, h, http.MethodGet, "/", http.Header{"Accept": {"application/json"}})
	var tab statuspage.Table
	if err := json.NewDecoder(resp.Body).Decode(&tab); err != nil {
		t.Fatal(err)
	}
	if len(tab.Groups) != 1 || tab.Groups[0].Group != "203.0.113.0/24" || len(tab.Groups[0].Held) != 2 || !tab.Groups[0].Probing {
		t.Errorf("JSON groups = %+v, want the hold of 203.0.113.0/24", tab.Groups)
	}

	resp = serve(t, h, http.MethodGet, "/", http.Header{"Accept": {"text/html"}})
	body, _ := io.ReadAll(resp.Body)
	page := string(body)
	for _, want := range []string{`<h2 id="groups">Groups held</h2>`, `data-group="203.0.113.0/24"`, "s0, s1", "s2, s3&lt;script&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "s3<script>") {
		t.Error("page shows a held label unescaped")
	}

	h, err = statuspage.New(fixed(snapshot))
	if err != nil {
		t.Fatal(err)
	}
	resp = serve(t, h, http.MethodGet, "/", http.Header{"Accept": {"application/json"}})
	body, _ = io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"groups": []`) {
		t.Errorf("JSON of a pool holding nothing lacks \"groups\": []")
	}
	resp = serve(t, h, http.MethodGet, "/", http.Header{"Accept": {"text/html"}})
	body, _ = io.ReadAll(resp.Body)
	if strings.Contains(string(body), `id="groups"`) {
		t.Error("the page of a pool holding nothing has a groups section")
	}
}

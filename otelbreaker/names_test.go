package otelbreaker_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/proxybreaker/proxybreaker/otelbreaker"
)

// declaredKeys returns every attribute key the package declares: the string of each
// attribute.Key("…") in its non-test files.
func declaredKeys(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, pkg := range pkgs {
		ast.Inspect(pkg, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			lit, isLit := call.Args[0].(*ast.BasicLit)
			if ok && isLit && sel.Sel.Name == "Key" && lit.Kind == token.STRING {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "attribute" {
					k, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					keys = append(keys, k)
				}
			}
			return true
		})
	}
	return keys
}

// promName turns an OTel name into Prometheus's form of it, as the exporter's
// UnderscoreEscapingWithSuffixes does before it adds suffixes: dots become underscores.
func promName(s string) string { return strings.ReplaceAll(s, ".", "_") }

// TestAttributeKeysAreNotMetricNames: no attribute key — declared in the package, seen on a
// data point, a span or a span event of a full export, or exported as a Prometheus label — is,
// with its dots turned into underscores, the name of an instrument, in its OTel form or as the
// Prometheus exporter names its families and series. Regression: proxybreaker_breaker_state was
// both the state gauge and a label of proxybreaker_breakers.
func TestAttributeKeysAreNotMetricNames(t *testing.T) {
	e := exportAll(t)
	declared := declaredKeys(t)
	if len(declared) < 30 || !slices.Contains(declared, string(otelbreaker.AttrState)) {
		t.Fatalf("found %d attribute keys in the package's source: %q", len(declared), declared)
	}
	keys := map[string]string{} // Prometheus form → where it was seen
	for _, k := range declared {
		keys[promName(k)] = "declared key " + k
	}
	for name, sets := range pointSets(t, e.rm) {
		for _, set := range sets {
			for _, kv := range set.ToSlice() {
				keys[promName(string(kv.Key))] = "key " + string(kv.Key) + " on " + name
			}
		}
	}
	for _, s := range e.b.spans.Ended() {
		for _, kv := range s.Attributes() {
			keys[promName(string(kv.Key))] = "key " + string(kv.Key) + " on span " + s.Name()
		}
		for _, ev := range s.Events() {
			for _, kv := range ev.Attributes {
				keys[promName(string(kv.Key))] = "key " + string(kv.Key) + " on event " + ev.Name
			}
		}
	}
	for _, f := range e.families {
		for _, l := range f.labels {
			keys[l] = "label " + l + " of " + f.name
		}
	}

	metrics := map[string]string{}
	for name := range pointSets(t, e.rm) {
		metrics[promName(name)] = "instrument " + name
	}
	for _, f := range e.families {
		metrics[f.name] = "family " + f.name
		for _, s := range f.series() {
			metrics[s] = "series " + s + " of " + f.name
		}
	}
	if len(metrics) < len(allInstruments) {
		t.Fatalf("only %d metric names: %v", len(metrics), metrics)
	}
	for k, where := range keys {
		if m, clash := metrics[k]; clash {
			t.Errorf("%s is %s and %s", k, where, m)
		}
	}
}

// docTable returns the rows of the first table after the line heading in doc, each row's cells
// trimmed, the header and separator left out.
func docTable(t *testing.T, doc, heading string) [][]string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/metrics.md has no heading %q", heading)
	}
	var rows [][]string
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "|") {
			if len(rows) > 0 {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	if len(rows) < 3 {
		t.Fatalf("docs/metrics.md: the table under %q has %d rows", heading, len(rows))
	}
	return rows[2:]
}

// ticked returns the `quoted` names in a table cell.
func ticked(cell string) []string {
	var out []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// instrumentKind names the instrument that exports data d.
func instrumentKind(d metricdata.Aggregation) string {
	switch d := d.(type) {
	case metricdata.Gauge[int64]:
		return "Int64ObservableGauge"
	case metricdata.Gauge[float64]:
		return "Float64ObservableGauge"
	case metricdata.Sum[int64]:
		if d.IsMonotonic {
			return "Int64Counter"
		}
	case metricdata.Sum[float64]:
		if d.IsMonotonic {
			return "Float64Counter"
		}
	case metricdata.Histogram[float64]:
		return "Float64Histogram"
	}
	return "?"
}

// TestDocsListEveryInstrument: docs/metrics.md lists every instrument a full export holds, and no
// other: in the Metrics table its OTel name, instrument, unit, attributes (by their short names in
// the Attributes table) and Prometheus name; in the As exported table its Prometheus type and
// every label. Every proxybreaker_ name the page mentions is exported, and every
// proxybreaker.… name is an instrument, an attribute key, a span or an event.
func TestDocsListEveryInstrument(t *testing.T) {
	e := exportAll(t)
	raw, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)

	short := map[string]string{} // attribute short name → key
	for _, row := range docTable(t, doc, "### Attributes") {
		m := regexp.MustCompile("^`([^`]+)` \\(([^)]+)\\)$").FindStringSubmatch(row[0])
		if m == nil {
			t.Errorf("Attributes table: %q has no short name in parentheses", row[0])
			continue
		}
		short[m[2]] = m[1]
		if got, want := ticked(row[1]), []string{promName(m[1])}; !slices.Equal(got, want) {
			t.Errorf("Attributes table: %s's Prometheus label %q, want %q", m[1], got, want)
		}
	}
	rows := map[string][]string{}
	for _, row := range docTable(t, doc, "## Metrics") {
		rows[strings.Trim(row[0], "`")] = row
	}
	sets := pointSets(t, e.rm)
	var instruments []string
	for _, sm := range e.rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			instruments = append(instruments, m.Name)
			row, ok := rows[m.Name]
			if !ok {
				t.Errorf("Metrics table: no row for %s", m.Name)
				continue
			}
			var keys []string
			for _, set := range sets[m.Name] {
				for _, kv := range set.ToSlice() {
					keys = append(keys, string(kv.Key))
				}
			}
			slices.Sort(keys)
			keys = slices.Compact(keys)
			var documented []string
			if row[3] != "—" {
				for _, s := range strings.Split(row[3], ",") {
					documented = append(documented, short[strings.TrimSpace(s)])
				}
			}
			slices.Sort(documented)
			f := e.family(t, m)
			for _, c := range []struct{ what, got, want string }{
				{"instrument", row[1], instrumentKind(m.Data)},
				{"unit", row[2], "`" + m.Unit + "`"},
				{"attributes", strings.Join(documented, ", "), strings.Join(keys, ", ")},
				{"Prometheus name", ticked(row[4])[0], f.name},
			} {
				if c.got != c.want {
					t.Errorf("Metrics table, %s: %s %q, exported %q", m.Name, c.what, c.got, c.want)
				}
			}
		}
	}
	for name := range rows {
		if !slices.Contains(instruments, name) {
			t.Errorf("Metrics table lists %s, which the export does not hold", name)
		}
	}

	exported := map[string]family{}
	for _, f := range e.ours() {
		exported[f.name] = f
	}
	listed := docTable(t, doc, "### As exported")
	for _, row := range listed {
		name := strings.Trim(row[0], "`")
		f, ok := exported[name]
		if !ok {
			t.Errorf("As exported table lists %s, which the export does not hold", name)
			continue
		}
		var want []string
		for _, l := range f.labels {
			if !strings.HasPrefix(l, "otel_scope_") {
				want = append(want, l)
			}
		}
		got := ticked(row[2])
		slices.Sort(got)
		if row[1] != strings.ToLower(f.typ) || !slices.Equal(got, want) {
			t.Errorf("As exported table, %s: %s with %q; exported: %s with %q", name, row[1], got, strings.ToLower(f.typ), want)
		}
		delete(exported, name)
	}
	for name := range exported {
		t.Errorf("As exported table: no row for %s", name)
	}

	promNames, _ := exportedNames(e)
	for _, n := range regexp.MustCompile(`proxybreaker_[a-z_]+`).FindAllString(doc, -1) {
		if !promNames[n] {
			t.Errorf("docs/metrics.md mentions %s, which is no exported series, family or label", n)
		}
	}
	otelNames := map[string]bool{otelbreaker.SpanName: true, otelbreaker.EventTransition: true,
		otelbreaker.EventRefused: true, otelbreaker.EventThrottled: true}
	for _, n := range instruments {
		otelNames[n] = true
	}
	for _, k := range declaredKeys(t) {
		otelNames[k] = true
	}
	for _, m := range regexp.MustCompile("`(proxybreaker\\.[a-z_.]+)`").FindAllStringSubmatch(doc, -1) {
		if !otelNames[m[1]] {
			t.Errorf("docs/metrics.md mentions %s, which is no instrument, attribute, span or event", m[1])
		}
	}
}

// exportedNames returns every name a query may use: the families, their series and their labels;
// and the labels of each series.
func exportedNames(e export) (names map[string]bool, labelsOf map[string][]string) {
	names, labelsOf = map[string]bool{}, map[string][]string{}
	for _, f := range e.families {
		names[f.name] = true
		for _, s := range f.series() {
			names[s] = true
			labelsOf[s] = f.labels
		}
		for _, l := range f.labels {
			names[l] = true
		}
	}
	return names, labelsOf
}

// TestDashboardUsesExportedNames: every query of examples/otel/dashboard.json — panel targets and
// template variables — selects series the Prometheus exporter emits, matches and groups by labels
// those series carry, and its legend names such labels.
func TestDashboardUsesExportedNames(t *testing.T) {
	e := exportAll(t)
	_, labelsOf := exportedNames(e)
	raw, err := os.ReadFile("../examples/otel/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d any
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	targets, variables := dashboardQueries(d, "")
	var (
		labelValues = regexp.MustCompile(`^label_values\((\w+),\s*(\w+)\)$`)
		grouping    = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
		selector    = regexp.MustCompile(`(\w+)\s*\{([^}]*)\}`)
		matcher     = regexp.MustCompile(`(\w+)\s*(?:=~|!~|!=|=)\s*"`)
		metricName  = regexp.MustCompile(`\bproxybreaker_\w+`)
		legend      = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)
	)
	// check checks one query; it returns the labels of the series it selects.
	check := func(where, expr string) []string {
		var groups []string
		for _, m := range grouping.FindAllStringSubmatch(expr, -1) {
			for _, l := range strings.Split(m[1], ",") {
				groups = append(groups, strings.TrimSpace(l))
			}
		}
		expr = grouping.ReplaceAllString(expr, "")
		for _, m := range selector.FindAllStringSubmatch(expr, -1) {
			for _, l := range matcher.FindAllStringSubmatch(m[2], -1) {
				if !slices.Contains(labelsOf[m[1]], l[1]) {
					t.Errorf("%s: %s is matched by %s, a label it does not carry (it has %q)", where, m[1], l[1], labelsOf[m[1]])
				}
			}
		}
		var labels []string
		names := metricName.FindAllString(selector.ReplaceAllString(expr, "$1"), -1)
		if len(names) == 0 {
			t.Errorf("%s: %q selects none of our series", where, expr)
		}
		for _, n := range names {
			if ls, ok := labelsOf[n]; ok {
				labels = append(labels, ls...)
			} else {
				t.Errorf("%s: %s is not a series the exporter emits", where, n)
			}
		}
		for _, g := range groups {
			if !slices.Contains(labels, g) {
				t.Errorf("%s: grouped by %s, which none of its series carries", where, g)
			}
		}
		if len(groups) > 0 {
			return groups
		}
		return labels
	}
	for _, tg := range targets {
		labels := check(tg.where, tg.expr)
		for _, m := range legend.FindAllStringSubmatch(tg.legend, -1) {
			if !slices.Contains(labels, m[1]) {
				t.Errorf("%s: legend %q names %s, which its query's result does not carry", tg.where, tg.legend, m[1])
			}
		}
	}
	for _, v := range variables {
		m := labelValues.FindStringSubmatch(v.expr)
		if m == nil {
			t.Errorf("%s: %q is not label_values(metric, label)", v.where, v.expr)
			continue
		}
		if !slices.Contains(check(v.where, m[1]), m[2]) {
			t.Errorf("%s: %s does not carry %s", v.where, m[1], m[2])
		}
	}
	n := len(targets) + len(variables)
	if n < 10 {
		t.Fatalf("dashboard.json: %d queries; the file changed shape", n)
	}
}

// query is one PromQL expression of a dashboard, with where it is and its legend.
type query struct{ where, expr, legend string }

// dashboardQueries walks a decoded Grafana dashboard, at any depth (rows nest panels): every
// object with an "expr" is a panel target, every "definition" a template variable's query. where
// names the innermost titled or named object.
func dashboardQueries(v any, where string) (targets, variables []query) {
	switch v := v.(type) {
	case map[string]any:
		if title, ok := v["title"].(string); ok {
			where = "panel " + strconv.Quote(title)
		}
		if name, ok := v["name"].(string); ok {
			where = "variable " + name
		}
		if expr, ok := v["expr"].(string); ok {
			legend, _ := v["legendFormat"].(string)
			targets = append(targets, query{where, expr, legend})
		}
		if def, ok := v["definition"].(string); ok && def != "" {
			variables = append(variables, query{where: where, expr: def})
		}
		for _, x := range v {
			t, vs := dashboardQueries(x, where)
			targets, variables = append(targets, t...), append(variables, vs...)
		}
	case []any:
		for _, x := range v {
			t, vs := dashboardQueries(x, where)
			targets, variables = append(targets, t...), append(variables, vs...)
		}
	}
	return targets, variables
}

package otelbreaker_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// series flattens collected metrics into "name{k=v,…}" → value, attributes sorted by key. A
// histogram gives two entries, "name{…}:count" and "name{…}:sum".
func series(t *testing.T, rm metricdata.ResourceMetrics) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	put := func(name string, set attribute.Set, suffix string, v float64) {
		k := name + setString(set) + suffix
		if _, dup := out[k]; dup {
			t.Errorf("series %s reported twice", k)
		}
		out[k] = v
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					put(m.Name, p.Attributes, "", float64(p.Value))
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					put(m.Name, p.Attributes, "", p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					put(m.Name, p.Attributes, "", float64(p.Value))
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					put(m.Name, p.Attributes, "", p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					put(m.Name, p.Attributes, ":count", float64(p.Count))
					put(m.Name, p.Attributes, ":sum", p.Sum)
				}
			default:
				t.Errorf("metric %s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

// pointSets returns the attribute sets of every data point in rm, by metric name.
func pointSets(t *testing.T, rm metricdata.ResourceMetrics) map[string][]attribute.Set {
	t.Helper()
	out := map[string][]attribute.Set{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				out[m.Name] = attributeSets(d.DataPoints)
			case metricdata.Sum[float64]:
				out[m.Name] = attributeSets(d.DataPoints)
			case metricdata.Gauge[int64]:
				out[m.Name] = attributeSets(d.DataPoints)
			case metricdata.Gauge[float64]:
				out[m.Name] = attributeSets(d.DataPoints)
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], p.Attributes)
				}
			default:
				t.Errorf("metric %s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

func attributeSets[N int64 | float64](points []metricdata.DataPoint[N]) []attribute.Set {
	sets := make([]attribute.Set, len(points))
	for i, p := range points {
		sets[i] = p.Attributes
	}
	return sets
}

// setString renders a set as {k=v,…}, sorted by key (attribute.Set is sorted already).
func setString(set attribute.Set) string {
	var parts []string
	for _, kv := range set.ToSlice() {
		parts = append(parts, fmt.Sprintf("%s=%s", kv.Key, kv.Value.Emit()))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// key builds a series key from a metric name and k=v pairs in any order.
func key(name string, kvs ...string) string {
	kvs = slices.Clone(kvs)
	slices.Sort(kvs)
	return name + "{" + strings.Join(kvs, ",") + "}"
}

// diffSeries reports every series missing from got, unexpected in it, or with a different value.
func diffSeries(t *testing.T, step string, got, want map[string]float64) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		g, gok := got[k]
		w, wok := want[k]
		switch {
		case !gok:
			t.Errorf("%s: series %s missing, want %v", step, k, w)
		case !wok:
			t.Errorf("%s: series %s = %v, want no such series", step, k, g)
		case math.Abs(g-w) > 1e-9:
			t.Errorf("%s: series %s = %v, want %v", step, k, g, w)
		}
	}
}

package otelbreaker_test

import (
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/otelbreaker"
)

// labelPair renders the exit and origin labels of an attribute set as "exit|origin", "-" for
// either when absent.
func labelPair(set attribute.Set) string {
	get := func(k attribute.Key) string {
		if v, ok := set.Value(k); ok {
			return v.AsString()
		}
		return "-"
	}
	return get(otelbreaker.AttrExit) + "|" + get(otelbreaker.AttrOrigin)
}

// pointPairs returns the sorted, distinct label pairs of the data points of the named metrics.
func pointPairs(t *testing.T, rm metricdata.ResourceMetrics, names ...string) []string {
	t.Helper()
	var out []string
	for name, sets := range pointSets(t, rm) {
		if slices.Contains(names, name) {
			for _, set := range sets {
				out = append(out, labelPair(set))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// spanLabels is what the spans of a bench say about exits and origins: the label pairs of the
// attempt spans, of the transition events to OPEN, and of the refusal events, each sorted and
// distinct; and the exit labels and origin keys the attempt spans carry on their own.
type spanLabels struct {
	attempts, trips, refusals []string
	exitKeys, originKeys      []string
}

func readSpanLabels(b *bench) spanLabels {
	var l spanLabels
	for _, s := range b.spans.Ended() {
		for _, ev := range s.Events() {
			set := attribute.NewSet(ev.Attributes...)
			to, _ := set.Value(otelbreaker.AttrTo)
			switch {
			case ev.Name == otelbreaker.EventTransition && to.AsString() == "open":
				l.trips = append(l.trips, labelPair(set))
			case ev.Name == otelbreaker.EventRefused:
				l.refusals = append(l.refusals, labelPair(set))
			}
		}
		if s.Name() != otelbreaker.SpanName {
			continue
		}
		set := attribute.NewSet(s.Attributes()...)
		l.attempts = append(l.attempts, labelPair(set))
		e, _ := set.Value(otelbreaker.AttrExitKey)
		o, _ := set.Value(otelbreaker.AttrOriginKey)
		l.exitKeys = append(l.exitKeys, e.AsString())
		l.originKeys = append(l.originKeys, o.AsString())
	}
	for _, s := range []*[]string{&l.attempts, &l.trips, &l.refusals, &l.exitKeys, &l.originKeys} {
		slices.Sort(*s)
		*s = slices.Compact(*s)
	}
	return l
}

// TestSpansAndMetricsShareLabels: an attempt span, a transition event and a refusal event carry
// under proxybreaker.exit.label and proxybreaker.origin exactly the values of the data points
// their events were counted in — the origin mapped by WithOriginLabel, both capped by
// WithMaxSeries — so that one label selects a series and the traces behind it. The exit's own
// label and the raw origin key (127.0.0.1:41155, not "shop") are on spans only, never on a metric.
func TestSpansAndMetricsShareLabels(t *testing.T) {
	// Name origins by port, as examples/otel names its 127.0.0.1:PORT origins.
	byPort := func(origin string) string {
		switch origin {
		case "127.0.0.1:41155":
			return "shop"
		case "127.0.0.1:41156":
			return "down"
		}
		return "other"
	}
	const shopURL, downURL = "http://127.0.0.1:41155/items", "http://127.0.0.1:41156/"
	for _, tc := range []struct {
		name string
		opts []otelbreaker.Option
		run  func(b *bench)
		// want is the label pairs of the attempts; exitKeys and originKeys what the attempt
		// spans carry on their own.
		want, exitKeys, originKeys []string
	}{
		{
			name: "WithOriginLabel",
			opts: []otelbreaker.Option{otelbreaker.WithOriginLabel(byPort)},
			run: func(b *bench) {
				b.base.On("*", "127.0.0.1:41156", testkit.Reply{Err: testkit.ErrTimeout, Took: 500 * time.Millisecond})
				b.get(0, shopURL)
				// alpha×down and bravo×down trip; charlie's failure trips down's origin guard;
				// then down is refused.
				for i := range 8 {
					b.get(time.Duration(i+1)*time.Second, downURL)
				}
			},
			want:       []string{"alpha|down", "alpha|shop", "bravo|down", "charlie|down"},
			exitKeys:   []string{"alpha", "bravo", "charlie"},
			originKeys: []string{"127.0.0.1:41155", "127.0.0.1:41156"},
		},
		{
			name: "WithMaxSeries",
			opts: []otelbreaker.Option{otelbreaker.WithMaxSeries(1)},
			run: func(b *bench) {
				b.get(0, shop)
				b.get(time.Second, "https://c.example/") // a second pair: over the cap
			},
			want:       []string{"_other|_other", "alpha|shop.example"},
			exitKeys:   []string{"alpha"},
			originKeys: []string{"c.example", "shop.example"},
		},
		{
			name:       "WithoutOriginLabel",
			opts:       []otelbreaker.Option{otelbreaker.WithoutOriginLabel()},
			run:        func(b *bench) { b.get(0, shopURL) },
			want:       []string{"alpha|-"},
			exitKeys:   []string{"alpha"},
			originKeys: []string{"127.0.0.1:41155"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t, tc.opts...)
			tc.run(b)
			rm := b.collect(30 * time.Second)
			spans := readSpanLabels(b)
			for _, c := range []struct {
				what       string
				span, want []string
			}{
				{"attempt spans", spans.attempts, tc.want},
				{"attempt counter", pointPairs(t, rm, otelbreaker.MetricAttempts), tc.want},
				{"attempt duration", pointPairs(t, rm, otelbreaker.MetricAttemptTime), tc.want},
				{"trips counted", pointPairs(t, rm, otelbreaker.MetricTrips, otelbreaker.MetricGuardTrips), spans.trips},
				{"refusals counted", pointPairs(t, rm, otelbreaker.MetricRefusals), spans.refusals},
				{"exit keys on spans", spans.exitKeys, tc.exitKeys},
				{"origin keys on spans", spans.originKeys, tc.originKeys},
			} {
				if !slices.Equal(c.span, c.want) {
					t.Errorf("%s: %q, want %q", c.what, c.span, c.want)
				}
			}
			if tc.name == "WithOriginLabel" {
				if want := []string{"-|down", "alpha|down", "bravo|down"}; !slices.Equal(spans.trips, want) {
					t.Errorf("transition events to OPEN: %q, want %q", spans.trips, want)
				}
				if want := []string{"-|down"}; !slices.Equal(spans.refusals, want) {
					t.Errorf("refusal events: %q, want %q", spans.refusals, want)
				}
			}
			for name, sets := range pointSets(t, rm) {
				for _, set := range sets {
					for _, key := range []attribute.Key{otelbreaker.AttrExitKey, otelbreaker.AttrOriginKey} {
						if set.HasValue(key) {
							t.Errorf("a data point of %s carries the span-only attribute %s: %s", name, key, setString(set))
						}
					}
				}
			}
		})
	}
}

package proxyd

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/proxybreaker/proxybreaker/pool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// metrics are the daemon's own counts, beside otelbreaker's (which sees plain-HTTP attempts
// through the transport, and every breaker): connections and tunnels. They cost an atomic add on
// the path and are read by an OTel callback at each collection (RegisterMetrics).
type metrics struct {
	connsAccepted, connsOverCap, connsNotAllowed atomic.Int64
	authRefused, optionsRefused, targetsRefused  atomic.Int64
	tunnelsOpen, tunnelsOpened, tunnelsFailed    atomic.Int64
	tunnelsStalled, tunnelsKilled, tunnelsIdled  atomic.Int64

	mu       sync.Mutex
	verdicts map[verdictKey]int64 // tunnel verdicts, by outcome and class
}

type verdictKey struct {
	outcome pool.Outcome
	class   pool.Class
}

func (m *metrics) tunnelOpened() { m.tunnelsOpen.Add(1); m.tunnelsOpened.Add(1) }
func (m *metrics) tunnelClosed() { m.tunnelsOpen.Add(-1) }
func (m *metrics) tunnelFailed() { m.tunnelsFailed.Add(1) }
func (m *metrics) tunnelStalled() {
	m.tunnelsStalled.Add(1)
}
func (m *metrics) tunnelKilled() { m.tunnelsKilled.Add(1) }
func (m *metrics) tunnelIdled()  { m.tunnelsIdled.Add(1) }

func (m *metrics) tunnelJudged(v pool.Verdict) {
	m.mu.Lock()
	if m.verdicts == nil {
		m.verdicts = map[verdictKey]int64{}
	}
	m.verdicts[verdictKey{v.Outcome, v.Class}]++
	m.mu.Unlock()
}

// Stats is a snapshot of the daemon's own counts.
type Stats struct {
	ConnsAccepted   int64 `json:"conns_accepted"`
	ConnsOverCap    int64 `json:"conns_over_cap"`    // closed at once: MaxConns open already
	ConnsNotAllowed int64 `json:"conns_not_allowed"` // closed at once: not in the allowlist
	AuthRefused     int64 `json:"auth_refused"`      // 407s and SOCKS5 credential failures
	OptionsRefused  int64 `json:"options_refused"`   // bad username options or header
	TargetsRefused  int64 `json:"targets_refused"`   // private, loopback or link-local targets
	TunnelsOpen     int64 `json:"tunnels_open"`
	TunnelsOpened   int64 `json:"tunnels_opened"`
	TunnelsFailed   int64 `json:"tunnels_failed"`  // setup through the exit failed
	TunnelsStalled  int64 `json:"tunnels_stalled"` // no first byte back in time
	TunnelsKilled   int64 `json:"tunnels_killed"`  // closed because their pair or exit opened
	TunnelsIdled    int64 `json:"tunnels_idled"`   // closed silent both ways past TunnelIdleTimeout
}

// Stats returns the daemon's counts now.
func (s *Server) Stats() Stats {
	m := &s.metrics
	return Stats{
		ConnsAccepted: m.connsAccepted.Load(), ConnsOverCap: m.connsOverCap.Load(), ConnsNotAllowed: m.connsNotAllowed.Load(),
		AuthRefused: m.authRefused.Load(), OptionsRefused: m.optionsRefused.Load(), TargetsRefused: m.targetsRefused.Load(),
		TunnelsOpen: m.tunnelsOpen.Load(), TunnelsOpened: m.tunnelsOpened.Load(), TunnelsFailed: m.tunnelsFailed.Load(),
		TunnelsStalled: m.tunnelsStalled.Load(), TunnelsKilled: m.tunnelsKilled.Load(), TunnelsIdled: m.tunnelsIdled.Load(),
	}
}

// RegisterMetrics adds the daemon's instruments to meter, observed at each collection:
// proxybreakerd.connections (accepted, and refused by reason), proxybreakerd.tunnels.open,
// proxybreakerd.tunnels (opened, failed, stalled, killed, idled), proxybreakerd.tunnel.verdicts (by
// outcome and class) and proxybreakerd.refusals (auth, options, target). The returned func
// unregisters them.
func (s *Server) RegisterMetrics(meter metric.Meter) (func() error, error) {
	conns, err := meter.Int64ObservableCounter("proxybreakerd.connections", metric.WithDescription("client connections, by what became of them"))
	if err != nil {
		return nil, err
	}
	open, err := meter.Int64ObservableUpDownCounter("proxybreakerd.tunnels.open", metric.WithDescription("live tunnels"))
	if err != nil {
		return nil, err
	}
	tunnels, err := meter.Int64ObservableCounter("proxybreakerd.tunnels", metric.WithDescription("tunnels, by event"))
	if err != nil {
		return nil, err
	}
	verdicts, err := meter.Int64ObservableCounter("proxybreakerd.tunnel.verdicts", metric.WithDescription("tunnel verdicts, by outcome and class"))
	if err != nil {
		return nil, err
	}
	refusals, err := meter.Int64ObservableCounter("proxybreakerd.refusals", metric.WithDescription("requests refused before any pick, by reason"))
	if err != nil {
		return nil, err
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := s.Stats()
		for _, c := range []struct {
			v    int64
			what string
		}{{st.ConnsAccepted, "accepted"}, {st.ConnsOverCap, "over_cap"}, {st.ConnsNotAllowed, "not_allowed"}} {
			o.ObserveInt64(conns, c.v, metric.WithAttributes(attribute.String("result", c.what)))
		}
		o.ObserveInt64(open, st.TunnelsOpen)
		for _, c := range []struct {
			v    int64
			what string
		}{{st.TunnelsOpened, "opened"}, {st.TunnelsFailed, "failed"}, {st.TunnelsStalled, "stalled"}, {st.TunnelsKilled, "killed"}, {st.TunnelsIdled, "idled"}} {
			o.ObserveInt64(tunnels, c.v, metric.WithAttributes(attribute.String("event", c.what)))
		}
		for _, c := range []struct {
			v    int64
			what string
		}{{st.AuthRefused, "auth"}, {st.OptionsRefused, "options"}, {st.TargetsRefused, "target"}} {
			o.ObserveInt64(refusals, c.v, metric.WithAttributes(attribute.String("reason", c.what)))
		}
		s.metrics.mu.Lock()
		defer s.metrics.mu.Unlock()
		for k, n := range s.metrics.verdicts {
			o.ObserveInt64(verdicts, n, metric.WithAttributes(
				attribute.String("proxybreaker.verdict.outcome", k.outcome.String()),
				attribute.String("proxybreaker.verdict.class", string(k.class))))
		}
		return nil
	}, conns, open, tunnels, verdicts, refusals)
	if err != nil {
		return nil, err
	}
	return reg.Unregister, nil
}

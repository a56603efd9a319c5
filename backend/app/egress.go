package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// egressCounter is a provider filtering sandbox egress on this host (the
// Docker provider).
type egressCounter interface {
	EgressReady() error
	EgressViolations(ctx context.Context) (map[string]uint64, error)
}

// taskNetworkFilter puts task environments' networks under the Docker
// provider's egress rules (nil when the provider filters nothing here).
func taskNetworkFilter(p any) func(ctx context.Context, networkID string, allowOut []string) error {
	if f, ok := p.(interface {
		FilterNetwork(ctx context.Context, networkID string, allowOut []string) error
	}); ok {
		return f.FilterNetwork
	}
	return nil
}

// logEgress says at start-up whether sandboxes are filtered, and why not.
func logEgress(log *slog.Logger, p egressCounter, off bool) {
	switch err := p.EgressReady(); {
	case off:
		log.Warn("egress filtering is off (DREADNODE_EGRESS=off): sandboxes reach the host, private ranges and cloud metadata")
	case err != nil:
		log.Error("egress rules could not be installed; /readyz fails and sandboxes are not created until this is fixed", "error", err)
	default:
		log.Info("egress rules installed")
	}
}

// egressCollector exports the packets the egress rules dropped, read from
// the rules' counters at scrape time.
type egressCollector struct {
	p       egressCounter
	desc    *prometheus.Desc
	senders *prometheus.Desc
}

// egressSenders is a provider that also counts the containers whose
// packets were dropped.
type egressSenders interface {
	EgressSenders(ctx context.Context) (map[string]int, error)
}

func newEgressCollector(p egressCounter) *egressCollector {
	return &egressCollector{p: p, desc: prometheus.NewDesc("dreadnode_egress_dropped_packets_total",
		"Packets from sandboxes dropped by the egress rules, by reason (link_local, private, host, policy, offline); host-wide.",
		[]string{"reason"}, nil),
		senders: prometheus.NewDesc("dreadnode_egress_violating_containers",
			"Live containers (sandboxes and task services) whose packets the egress rules dropped, by reason; each sandbox's own counts are in its diagnostic.",
			[]string{"reason"}, nil)}
}

func (c *egressCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.senders }

func (c *egressCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := c.p.EgressViolations(ctx)
	if err != nil {
		return // filtering off or broken: /readyz says so, the metric is absent
	}
	for reason, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), reason)
	}
	if s, ok := c.p.(egressSenders); ok {
		if senders, err := s.EgressSenders(ctx); err == nil {
			for reason, n := range senders {
				ch <- prometheus.MustNewConstMetric(c.senders, prometheus.GaugeValue, float64(n), reason)
			}
		}
	}
}

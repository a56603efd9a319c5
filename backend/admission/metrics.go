package admission

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Collector exports the queue and use against quotas and capacity, read
// from the database at scrape time (right after a restart too, and across
// replicas), plus the admitter's wait-time histogram.
type Collector struct {
	db                       *store.DB
	a                        *Admitter
	depth, use, quota, capac *prometheus.Desc
}

// NewCollector returns the admission metrics of a.
func NewCollector(db *store.DB, a *Admitter) *Collector {
	return &Collector{db: db, a: a,
		depth: prometheus.NewDesc("dreadnode_admission_queue_depth", "Creates waiting in the admission queue, by org.", []string{"org"}, nil),
		use:   prometheus.NewDesc("dreadnode_admission_use", "Compute held (admitted, not yet removed) by org and resource (sandboxes, cpu, memory_mb).", []string{"org", "resource"}, nil),
		quota: prometheus.NewDesc("dreadnode_admission_quota", "An org's quota by resource (absent: unlimited).", []string{"org", "resource"}, nil),
		capac: prometheus.NewDesc("dreadnode_admission_capacity", "A provider's capacity by resource (absent: unlimited).", []string{"provider", "resource"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.use
	ch <- c.quota
	ch <- c.capac
	c.a.waits.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.a.waits.Collect(ch)
	for _, p := range c.a.providers() {
		cp := c.a.cfg.Capacity[p]
		for res, v := range map[string]int{"sandboxes": cp.Sandboxes, "cpu": cp.CPU, "memory_mb": cp.MemoryMB} {
			if v > 0 {
				ch <- prometheus.MustNewConstMetric(c.capac, prometheus.GaugeValue, float64(v), p, res)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	db := c.db.Reader()
	depth, err := queueDepths(ctx, db)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.depth, err)
		return
	}
	use, err := usageOf(ctx, db)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.use, err)
		return
	}
	orgs := map[string]bool{}
	for org, n := range depth {
		orgs[org] = true
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(n), org)
	}
	for k, u := range use {
		if k.org == "" {
			continue
		}
		orgs[k.org] = true
		for res, v := range map[string]int{"sandboxes": u.Sandboxes, "cpu": u.CPU, "memory_mb": u.MemoryMB} {
			ch <- prometheus.MustNewConstMetric(c.use, prometheus.GaugeValue, float64(v), k.org, res)
		}
	}
	for org := range orgs {
		q, err := QuotasOf(ctx, db, org)
		if err != nil {
			continue
		}
		for res, v := range map[string]*int{"sandboxes": q.MaxRunning, "cpu": q.MaxCPU, "memory_mb": q.MaxMemoryMB} {
			if v != nil {
				ch <- prometheus.MustNewConstMetric(c.quota, prometheus.GaugeValue, float64(*v), org, res)
			}
		}
	}
}

// queueDepths counts each org's queued records.
func queueDepths(ctx context.Context, db querier) (map[string]int, error) {
	rows, err := db.QueryContext(ctx, `SELECT org_id, COUNT(*) FROM sandboxes WHERE `+isQueued+` GROUP BY org_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	depth := map[string]int{}
	for rows.Next() {
		var org string
		var n int
		if err := rows.Scan(&org, &n); err != nil {
			return nil, err
		}
		depth[org] = n
	}
	return depth, rows.Err()
}

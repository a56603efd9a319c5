package app

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// recordCollector exports the number of records per kind and phase, read
// from the database at scrape time so it is right after a restart too.
type recordCollector struct {
	db   *store.DB
	desc *prometheus.Desc
}

func newRecordCollector(db *store.DB) *recordCollector {
	return &recordCollector{db: db, desc: prometheus.NewDesc("dreadnode_sandbox_records",
		"Sandbox records by kind and internal phase.", []string{"kind", "phase"}, nil)}
}

func (c *recordCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *recordCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	totals, err := c.db.PhaseTotals(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for k, n := range totals {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
}

// transitions counts the phases records enter.
var transitionsHelp = prometheus.CounterOpts{Name: "dreadnode_sandbox_transitions_total",
	Help: "Sandbox record transitions by the phase entered."}

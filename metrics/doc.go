// Package metrics reports what bttl does and what Bigtable's lagging GC
// leaves behind, through the OpenTelemetry metrics API and as a Prometheus
// collector, without forcing either backend on the application.
//
//	rec := metrics.New()                 // OpenTelemetry: the global MeterProvider
//	registry.MustRegister(rec)           // Prometheus: any registry of yours
//	client := ttlclient.Wrap(raw, ttlclient.WithRecorder(rec))
//
// Every name starts with bttl_ and carries its unit; labels are table,
// family, strategy and reason only, so their cardinality is bounded by the
// schemas (never row keys or columns). The headline figure is
// bttl_expired_not_collected_cells_total with its GC lag histogram: cells a
// complete GC would have removed but Bigtable still stores, found by shadow
// reads of a sampled fraction of reads (ttlclient.WithShadowSampling, 1% by
// default). dashboards/bttl.json is a Grafana dashboard over these names.
//
// Dependencies point one way: metrics imports ttlclient for the Recorder
// interface it implements; ttlclient never imports metrics.
package metrics

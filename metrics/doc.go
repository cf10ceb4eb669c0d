// Package metrics reports what bttl does and what Bigtable's lagging GC
// leaves behind, through the OpenTelemetry metrics API and as a Prometheus
// collector, without forcing either backend on the application.
//
//	rec := metrics.New()       // OpenTelemetry: the global MeterProvider
//	registry.MustRegister(rec) // Prometheus: any registry of yours
//	client := ttlclient.Wrap(raw, ttlclient.WithAdminClient(admin, project, instance), ttlclient.WithRecorder(rec))
//
// (A wrapped client checks each table's GC rules at Open, so it needs the
// admin client, or ttlclient.WithoutVerify. Example_wrap compiles and runs
// this snippet.)
//
// The same Recorder counts the wire guard's refusals
// (wireguard.New(schemas, wireguard.WithRecorder(rec))) into
// bttl_refusals_total: it implements wireguard.Recorder, and neither
// package imports the other.
//
// Every name starts with bttl_ and carries its unit; labels are table,
// family, strategy and reason only, so their cardinality is bounded by the
// schemas (never row keys or columns). The headline figure is
// bttl_shadow_read_expired_cells_total with its GC lag histogram: expired
// cells a complete GC would have removed but Bigtable still stores, as
// shadow reads of a sampled fraction of reads (ttlclient.WithShadowSampling,
// 1% by default) walked past them. It counts observations, not a stock: a
// cell read twice counts twice. The stock of
// expired-but-not-collected data (cells, bytes, oldest expiry) comes from a
// scan: audit.WriteMetrics writes it as bttl_audit_* gauges.
//
// dashboards/bttl.json is a Grafana dashboard over both, and
// alerts/bttl-rules.yaml holds Prometheus alerting rules, each with a
// runbook entry in docs/runbook.md; all four are generated from one source,
// mixin/mixin.yaml (go generate), and the tests run every query on a real
// Prometheus.
//
// The OpenTelemetry instruments are named by OpenTelemetry's conventions
// (OTelReads and the rest: dotted, the unit in the unit field); its
// Prometheus exporter gives them the Prometheus names (ReadsTotal and the
// rest) that the Recorder's own collector uses.
//
// Dependencies point one way: metrics imports ttlclient for the Recorder
// interface it implements; ttlclient never imports metrics.
package metrics

//go:generate go run ./internal/mixin/gen -root ..

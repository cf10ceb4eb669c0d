package migratejob

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// Names of the gauges WriteMetrics writes: a migration job's figures as
// its reports give them (a shard's run, or the job merged), at the
// report's Now. Labels: table, family (the source), target (the family
// written: the source in place, the family copied into otherwise) and
// shard ("i/n", or "all" for a merged job).
const (
	// MetricCells: cells by outcome (label outcome: moved, on_target,
	// expired_deleted, expired_left, ambiguous, changed, collisions,
	// too_large_to_pin, out_of_range, not_real_times). moved and
	// expired_deleted count the job's (Counts.MovedByJob, DeletedByJob):
	// earlier runs' included.
	MetricCells = "bttl_migrate_cells"
	// MetricRows: rows read (the shard's, the job's).
	MetricRows = "bttl_migrate_rows"
	// MetricUnmoved: cells left to move (changed, collisions, too large,
	// out of range, not real times, ambiguous): the job is done at 0.
	MetricUnmoved = "bttl_migrate_unmoved_cells"
	// MetricComplete: 1 when nothing is left to move (the shard's part,
	// or every shard's), 0 otherwise.
	MetricComplete = "bttl_migrate_complete"
	// MetricDryRun: 1 for the figures of a dry run (what would be done).
	MetricDryRun = "bttl_migrate_dry_run"
	// MetricTimestamp: when the figures were taken (the report's Now),
	// in Unix seconds.
	MetricTimestamp = "bttl_migrate_timestamp_seconds"
)

// ErrMetrics reports results that cannot be written as metrics (nil, or
// two of the same series).
var ErrMetrics = errors.New("bttl: cannot write migrate metrics")

// MetricsSeries is one set of series: a shard's report or a merged job.
type MetricsSeries struct {
	Table, Family, ToFamily string
	Shard                   string // "i/n", or "all"
	Now                     string // RFC 3339
	DryRun, Complete        bool
	Total                   Counts
}

// Series is the shard's report as metrics.
func (r *ShardReport) Series() MetricsSeries {
	return MetricsSeries{Table: r.Table, Family: r.Family, ToFamily: r.ToFamily, Shard: r.Shard.String(), Now: r.Now,
		DryRun: r.DryRun, Complete: r.Complete, Total: r.Total}
}

// Series is the job's result as metrics (shard "all").
func (r *JobResult) Series() MetricsSeries {
	return MetricsSeries{Table: r.Table, Family: r.Family, ToFamily: r.ToFamily, Shard: "all", Now: r.Now,
		DryRun: r.DryRun, Complete: r.Complete, Total: r.Total}
}

// WriteMetrics writes the series as Prometheus gauges in the text
// exposition format (node_exporter's textfile collector reads it).
func WriteMetrics(w io.Writer, series ...MetricsSeries) error {
	reg, err := metricsRegistry(series)
	if err != nil {
		return err
	}
	fams, err := reg.Gather()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMetrics, err)
	}
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(w, f); err != nil {
			return err
		}
	}
	return nil
}

// WriteMetricsFile writes what WriteMetrics writes to path atomically (a
// temporary file renamed over it), as audit.WriteMetricsFile does.
func WriteMetricsFile(path string, series ...MetricsSeries) error {
	reg, err := metricsRegistry(series)
	if err != nil {
		return err
	}
	return prometheus.WriteToTextfile(path, reg)
}

func metricsRegistry(series []MetricsSeries) (*prometheus.Registry, error) {
	labels := []string{"table", "family", "target", "shard"}
	gauge := func(name, help string, l ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, l)
	}
	var (
		cells    = gauge(MetricCells, "Cells a migration job read, by outcome (moved and expired_deleted: by every run of the job).", append(labels, "outcome")...)
		rows     = gauge(MetricRows, "Rows a migration job read.", labels...)
		unmoved  = gauge(MetricUnmoved, "Cells a migration job has left to move: changed meanwhile, collisions, too large to pin, out of range, not real times, ambiguous.", labels...)
		complete = gauge(MetricComplete, "1 when nothing is left to move, 0 otherwise.", labels...)
		dry      = gauge(MetricDryRun, "1 when the figures are a dry run's (what would be done).", labels...)
		when     = gauge(MetricTimestamp, "When the figures were taken, in Unix seconds.", labels...)
	)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(cells, rows, unmoved, complete, dry, when)
	seen := map[[4]string]bool{}
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	for _, s := range series {
		target := s.ToFamily
		if target == "" {
			target = s.Family
		}
		l := []string{s.Table, s.Family, target, s.Shard}
		if s.Table == "" || s.Family == "" {
			return nil, fmt.Errorf("%w: a series without a table or family", ErrMetrics)
		}
		if seen[[4]string(l)] {
			return nil, fmt.Errorf("%w: two series of table %q, family %q, shard %s", ErrMetrics, s.Table, s.Family, s.Shard)
		}
		seen[[4]string(l)] = true
		t := s.Total
		for _, o := range []struct {
			name string
			n    int64
		}{
			{"moved", t.MovedByJob()}, {"on_target", t.OnTarget}, {"expired_deleted", t.DeletedByJob()}, {"expired_left", t.ExpiredLeft},
			{"ambiguous", t.Ambiguous}, {"changed", t.Changed}, {"collisions", t.Collisions}, {"too_large_to_pin", t.TooLargeToPin},
			{"out_of_range", t.OutOfRange}, {"not_real_times", t.NotRealTimes},
		} {
			cells.WithLabelValues(append(l, o.name)...).Set(float64(o.n))
		}
		rows.WithLabelValues(l...).Set(float64(t.Rows))
		unmoved.WithLabelValues(l...).Set(float64(t.Unmoved()))
		complete.WithLabelValues(l...).Set(b(s.Complete))
		dry.WithLabelValues(l...).Set(b(s.DryRun))
		if now, err := time.Parse(time.RFC3339Nano, s.Now); err == nil {
			when.WithLabelValues(l...).Set(float64(now.UnixMicro()) / 1e6)
		}
	}
	return reg, nil
}

package audit

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"cloud.google.com/go/bigtable"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/bttl/bttl/strategy"
)

// Names of the gauges WriteMetrics writes: the stock a scan measured, at the
// report's Now. They start with bttl_audit_ so that they cannot be taken for
// the read path's counters (package metrics), which count observations.
const (
	// MetricStoredCells and MetricStoredBytes: every cell of the family the
	// scan read, whatever its state (bytes are value bytes).
	MetricStoredCells = "bttl_audit_stored_cells"
	MetricStoredBytes = "bttl_audit_stored_bytes"
	// MetricLiveCells and MetricLiveBytes: cells the schema's strategy still
	// serves (all the cells of an unmanaged family or one not in the schema).
	MetricLiveCells = "bttl_audit_live_cells"
	MetricLiveBytes = "bttl_audit_live_bytes"
	// MetricExpiredNotCollectedCells and ...Bytes: cells of an age family
	// (one-second, default expiry) expired at Now, still stored: what GC
	// has not collected yet, and what is billed for nothing.
	// Cells of a family not on the GC rule its strategy needs
	// (Family.NotOnItsRule) are not among them: GC follows the family's
	// rule, so they are no GC lag; see MetricNotOnRuleCells.
	MetricExpiredNotCollectedCells = "bttl_audit_expired_not_collected_cells"
	MetricExpiredNotCollectedBytes = "bttl_audit_expired_not_collected_bytes"
	// MetricOldestExpiry: the earliest expiry instant among them, in Unix
	// seconds; absent when the family has no expired cell.
	MetricOldestExpiry = "bttl_audit_expired_not_collected_oldest_expiry_timestamp_seconds"
	// MetricNotOnRuleCells and ...Bytes: cells of an age family that its
	// strategy reads as expired while the family is not on the GC rule the
	// strategy needs (Family.NotOnRule): legacy real timestamps, a
	// migration under way, or cells of a family with no rule. Absent when
	// the rules were not read.
	MetricNotOnRuleCells = "bttl_audit_not_on_rule_cells"
	MetricNotOnRuleBytes = "bttl_audit_not_on_rule_bytes"
	// MetricGCRuleMismatch: 1 for a managed family whose GC rule is not the
	// one its strategy needs (another rule, or none:
	// Family.NotOnItsRule), 0 for one on its rule; absent when the rules
	// were not read.
	MetricGCRuleMismatch = "bttl_audit_gc_rule_mismatch"
	// MetricOneSecondAtOrBeforeNowCells: cells of a one-second family whose
	// timestamps are at or before Now, as real or server timestamps are;
	// not written for a family whose one-second GC rule is in place
	// (Family.Adopted), where such cells are expired ones.
	MetricOneSecondAtOrBeforeNowCells = "bttl_audit_one_second_at_or_before_now_cells"
	// MetricBeyondKeptCells and ...Bytes: cells beyond the N versions kept
	// per column (sequence families, age families with a max-versions
	// union).
	MetricBeyondKeptCells = "bttl_audit_beyond_kept_cells"
	MetricBeyondKeptBytes = "bttl_audit_beyond_kept_bytes"
	// MetricWriteTimeCompanionCells and ...Bytes: write-time companions of
	// a family with write times (strategy.WithWriteTime), counted apart
	// from the data (stored_cells and the others count data only).
	MetricWriteTimeCompanionCells = "bttl_audit_write_time_companion_cells"
	MetricWriteTimeCompanionBytes = "bttl_audit_write_time_companion_bytes"
	// MetricHiddenReservedCells: cells of a family with write times whose
	// qualifiers are reserved (0xFF 0xFF...) but not companions: stored and
	// hidden from every read through bttl.
	MetricHiddenReservedCells = "bttl_audit_hidden_reserved_cells"
	// MetricNotSequenceCells: cells of a sequence family whose timestamps
	// are not sequence numbers; MetricRealTimeCells: those of them that are
	// real times (cbt, server timestamps), which outrank every revision.
	MetricNotSequenceCells = "bttl_audit_not_sequence_cells"
	MetricRealTimeCells    = "bttl_audit_real_time_cells"
	// MetricSequenceNumberCells: cells of an age family whose timestamps
	// are sequence numbers (before strategy.RealTimeFloor): the age rule
	// deletes them.
	MetricSequenceNumberCells = "bttl_audit_sequence_number_cells"
	// MetricGCRuleMissing: 1 for a managed family with no GC rule (its
	// expired cells are never collected), 0 for one with a rule; absent
	// when the rules were not read (Report.NoteGCRules).
	MetricGCRuleMissing = "bttl_audit_gc_rule_missing"
	// Per table: rows read, the largest row's size, and when the figures
	// were taken (the report's Now, Unix seconds).
	MetricRows            = "bttl_audit_rows"
	MetricLargestRowBytes = "bttl_audit_largest_row_bytes"
	MetricTimestamp       = "bttl_audit_timestamp_seconds"
)

// StrategyNotInSchema is the strategy label of a family the scan found but
// the schema does not name.
const StrategyNotInSchema = "not_in_schema"

// ErrMetrics reports reports that cannot be written as metrics (a nil
// report, or two reports of one table, whose series would collide).
var ErrMetrics = errors.New("bttl: cannot write audit metrics")

// WriteMetrics writes the reports' figures as Prometheus gauges, in the text
// exposition format (what node_exporter's textfile collector reads). Labels
// are table, family and strategy (the strategy's kind, as in package
// metrics: one-second, default-expiry, sequence, unmanaged, or
// not_in_schema). Nothing is written if a report is nil or two reports name
// the same table.
func WriteMetrics(w io.Writer, reports []*Report) error {
	reg, err := gatherer(reports)
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

// WriteMetricsFile writes what WriteMetrics writes to path atomically: to a
// temporary file in the same directory, then renamed over path, so a
// collector reading the directory never sees half a file. node_exporter's
// textfile collector reads only names ending in .prom.
func WriteMetricsFile(path string, reports []*Report) error {
	reg, err := gatherer(reports)
	if err != nil {
		return err
	}
	return prometheus.WriteToTextfile(path, reg)
}

func gatherer(reports []*Report) (*prometheus.Registry, error) {
	tfs := []string{"table", "family", "strategy"}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	var (
		stored       = gauge(MetricStoredCells, "Cells of data stored in the family when the audit scanned it, whatever their state (write-time companions apart).", tfs...)
		storedBytes  = gauge(MetricStoredBytes, "Value bytes of the data stored in the family when the audit scanned it.", tfs...)
		companions   = gauge(MetricWriteTimeCompanionCells, "Write-time companion cells stored beside the data of a family with write times.", tfs...)
		compBytes    = gauge(MetricWriteTimeCompanionBytes, "Value bytes of the write-time companion cells.", tfs...)
		hidden       = gauge(MetricHiddenReservedCells, "Cells of a family with write times whose qualifiers are reserved (0xFF 0xFF) but not companions: hidden from every read through bttl.", tfs...)
		live         = gauge(MetricLiveCells, "Cells the schema's strategy still serves.", tfs...)
		liveBytes    = gauge(MetricLiveBytes, "Value bytes of the live cells.", tfs...)
		expired      = gauge(MetricExpiredNotCollectedCells, "Expired cells of an age family still stored (not yet collected by GC), in a family on the GC rule its strategy needs: the stock, not reads of it (cells of a family not on its rule are bttl_audit_not_on_rule_cells).", tfs...)
		expiredBytes = gauge(MetricExpiredNotCollectedBytes, "Value bytes of the expired cells still stored.", tfs...)
		oldest       = gauge(MetricOldestExpiry, "Earliest expiry instant among the expired cells still stored, in Unix seconds.", tfs...)
		notOnRule    = gauge(MetricNotOnRuleCells, "Cells of an age family its strategy reads as expired while the family is not on the GC rule the strategy needs (legacy real timestamps, a migration under way): GC follows the family's rule, so not GC lag.", tfs...)
		notOnRuleB   = gauge(MetricNotOnRuleBytes, "Value bytes of the cells not on their rule yet.", tfs...)
		mismatch     = gauge(MetricGCRuleMismatch, "1 when the managed family's GC rule is not the one its strategy needs (another rule, or none); 0 when it is.", tfs...)
		atOrBefore   = gauge(MetricOneSecondAtOrBeforeNowCells, "Cells of a one-second family whose timestamp is at or before the audit's time (real or server timestamps): a one-second GC rule deletes them.", tfs...)
		beyond       = gauge(MetricBeyondKeptCells, "Cells beyond the N versions kept per column.", tfs...)
		beyondBytes  = gauge(MetricBeyondKeptBytes, "Value bytes of the cells beyond the N versions kept.", tfs...)
		notSeq       = gauge(MetricNotSequenceCells, "Cells of a sequence family whose timestamps are not sequence numbers (seq*1000).", tfs...)
		realTimes    = gauge(MetricRealTimeCells, "Cells of a sequence family whose timestamps are real times (cbt, server timestamps): they outrank every revision.", tfs...)
		seqNumbers   = gauge(MetricSequenceNumberCells, "Cells of an age family whose timestamps are sequence numbers: the age rule deletes them.", tfs...)
		noRule       = gauge(MetricGCRuleMissing, "1 when the managed family has no GC rule, so GC never collects its expired cells; 0 when it has one.", tfs...)
		rows         = gauge(MetricRows, "Rows the audit read.", "table")
		largest      = gauge(MetricLargestRowBytes, "Size of the largest row the audit read, in bytes.", "table")
		when         = gauge(MetricTimestamp, "When the audit's figures were taken, in Unix seconds.", "table")
	)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(stored, storedBytes, companions, compBytes, hidden, live, liveBytes, expired, expiredBytes, oldest, notOnRule, notOnRuleB, mismatch, atOrBefore, beyond, beyondBytes, notSeq, realTimes, seqNumbers, noRule, rows, largest, when)

	seen := map[string]bool{}
	for i, r := range reports {
		if r == nil {
			return nil, fmt.Errorf("%w: report %d is nil", ErrMetrics, i)
		}
		if seen[r.Table] {
			return nil, fmt.Errorf("%w: two reports of table %q", ErrMetrics, r.Table)
		}
		seen[r.Table] = true
		rows.WithLabelValues(r.Table).Set(float64(r.Rows))
		largest.WithLabelValues(r.Table).Set(float64(r.LargestRowBytes))
		when.WithLabelValues(r.Table).Set(seconds(r.Now))
		for _, f := range r.Families {
			kind := f.kind()
			l := []string{r.Table, f.Family, kind}
			stored.WithLabelValues(l...).Set(float64(f.Cells))
			storedBytes.WithLabelValues(l...).Set(float64(f.Bytes))
			live.WithLabelValues(l...).Set(float64(f.Live))
			// Every cell is live, expired, not on its rule yet or beyond
			// the versions kept.
			liveBytes.WithLabelValues(l...).Set(float64(f.Bytes - f.ExpiredBytes - f.NotOnRuleBytes - f.BeyondKeptBytes))
			oneSecond, defaultExpiry, sequence := kind == strategy.KindOneSecond.String(), kind == strategy.KindDefaultExpiry.String(), kind == strategy.KindSequence.String()
			if oneSecond || defaultExpiry {
				seqNumbers.WithLabelValues(l...).Set(float64(f.SequenceNumbers))
				expired.WithLabelValues(l...).Set(float64(f.Expired))
				expiredBytes.WithLabelValues(l...).Set(float64(f.ExpiredBytes))
				if f.Expired > 0 {
					oldest.WithLabelValues(l...).Set(seconds(f.OldestExpiry))
				}
				if f.GCRule != "" || f.NotOnRule > 0 {
					notOnRule.WithLabelValues(l...).Set(float64(f.NotOnRule))
					notOnRuleB.WithLabelValues(l...).Set(float64(f.NotOnRuleBytes))
				}
			}
			if oneSecond && !f.Adopted() {
				atOrBefore.WithLabelValues(l...).Set(float64(f.AtOrBeforeNow))
			}
			if f.GCRule != "" && (oneSecond || defaultExpiry || sequence) {
				missing := 0.0
				if f.NeverCollected() {
					missing = 1
				}
				noRule.WithLabelValues(l...).Set(missing)
				off := 0.0
				if f.NotOnItsRule() {
					off = 1
				}
				mismatch.WithLabelValues(l...).Set(off)
			}
			if f.writeTime() {
				companions.WithLabelValues(l...).Set(float64(f.Companions))
				compBytes.WithLabelValues(l...).Set(float64(f.CompanionBytes))
				hidden.WithLabelValues(l...).Set(float64(f.HiddenReserved))
			}
			if sequence {
				notSeq.WithLabelValues(l...).Set(float64(f.NotSequence))
				realTimes.WithLabelValues(l...).Set(float64(f.RealTimes))
			}
			if sequence || ((oneSecond || defaultExpiry) && f.Versions > 0) {
				beyond.WithLabelValues(l...).Set(float64(f.BeyondKept))
				beyondBytes.WithLabelValues(l...).Set(float64(f.BeyondKeptBytes))
			}
		}
	}
	return reg, nil
}

// kind is the family's strategy kind as Strategy names it (one-second,
// default-expiry, sequence, unmanaged), or StrategyNotInSchema: read from
// Strategy, which a report read back from JSON (audit merge) keeps.
func (f Family) kind() string {
	if f.Strategy == notInSchema {
		return StrategyNotInSchema
	}
	k, _, _ := strings.Cut(f.Strategy, "(")
	k, _, _ = strings.Cut(k, "+")
	return k
}

// writeTime reports a family with write times, read from Strategy as kind
// is (strategy.Policy.String ends such a policy with "+writetime").
func (f Family) writeTime() bool {
	return f.Strategy != notInSchema && strings.HasSuffix(f.Strategy, "+writetime")
}

// seconds converts a Bigtable timestamp (microseconds) to Unix seconds.
func seconds(ts bigtable.Timestamp) float64 { return float64(ts) / 1e6 }

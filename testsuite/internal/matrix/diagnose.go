package matrix

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/testsuite/internal/model"
	"github.com/bttl/bttl/ttlclient"
)

// What a failure report carries to diagnose a failure that does not replay
// (a flake): a seed replays the suite's decisions, not real time, so the
// clock readings, the time-to-idle decisions and what the server stored
// are in the report itself.

// logEntry is one line of the run's log: a step's operation, or a
// time-to-idle decision, with the clock readings when it was recorded.
type logEntry struct {
	step int
	text string
	rows []string // the rows it touched; none: every row (a clock move)
	// model: the last instant the suite gave the model (a write's clock
	// reading, a read's time, a refresh's clock); clock: the injected
	// clock's reading; real: the wall clock (the servers' GC runs on it).
	model, clock, real time.Time
}

// logKeep bounds the log the row histories of a report come from.
const logKeep = 4000

func (e logEntry) String() string {
	return fmt.Sprintf("step %d: %s [model %s, clock %s, real %s (clock %s ahead)]", e.step, e.text,
		clockString(e.model), clockString(e.clock), clockString(e.real), e.clock.Sub(e.real))
}

func (e logEntry) touches(row string) bool {
	if len(e.rows) == 0 {
		return true
	}
	for _, r := range e.rows {
		if r == row {
			return true
		}
	}
	return false
}

// logRows appends an entry about rows to the run's log.
func (r *runner) logRows(text string, rows ...string) {
	r.log = append(r.log, logEntry{step: r.step, text: text, rows: rows, model: r.modelAt, clock: r.cfg.Clock.Now(), real: time.Now()})
	if len(r.log) > logKeep {
		r.log = append(r.log[:0:0], r.log[len(r.log)-logKeep/2:]...)
	}
}

// failCells is fail for a failure about cells: the report adds the
// history of each one's row (every entry that touched it, with its clock
// readings) and what the model and the server store in its column now.
func (r *runner) failCells(what, detail string, cells []model.Cell) error {
	err := r.fail(what, detail)
	var me *MismatchError
	if !asMismatch(err, &me) {
		return err
	}
	type col struct{ row, family, column string }
	seen := map[col]bool{}
	var cols []col
	rows := map[string]bool{}
	for _, c := range cells {
		k := col{c.Row, c.Family, c.Column}
		if !seen[k] {
			seen[k] = true
			cols = append(cols, k)
		}
		rows[c.Row] = true
	}
	sort.Slice(cols, func(i, j int) bool {
		a, b := cols[i], cols[j]
		return a.row < b.row || (a.row == b.row && (a.family < b.family || (a.family == b.family && a.column < b.column)))
	})
	var keys []string
	for k := range rows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var lines []string
		for _, e := range r.log {
			if e.touches(k) {
				lines = append(lines, e.String())
			}
		}
		me.RowHistory = append(me.RowHistory, fmt.Sprintf("row %s (%d entries; model: the instant the suite gave the model, clock: the injected clock, real: the wall clock the servers' GC runs on):\n    %s",
			k, len(lines), strings.Join(lines, "\n    ")))
	}
	stored := r.serverStored(keys)
	for _, c := range cols {
		var m, s []string
		for _, x := range r.m.StoredRaw(c.row) {
			if x.Family == c.family && strings.TrimPrefix(x.Column, model.CompanionPrefix) == c.column {
				m = append(m, r.cellText(x))
			}
		}
		for _, x := range stored[c.row] {
			if x.Family == c.family && strings.TrimPrefix(x.Column, model.CompanionPrefix) == c.column {
				s = append(s, r.cellText(x))
			}
		}
		me.Stored = append(me.Stored, fmt.Sprintf("%s %s:%s at clock %s, real %s:\n    model stores:  %s\n    server stores: %s",
			c.row, c.family, c.column, clockString(r.cfg.Clock.Now()), clockString(time.Now()), orNone(m), orNone(s)))
	}
	if r.cfg.Raw == nil {
		me.Stored = append(me.Stored, "(no raw table: what the server stores is not shown)")
	}
	lead := time.Until(r.modelAt)
	note := ""
	if lead <= 0 {
		note = ": OUTLASTED, the servers' GC may have collected cells the model holds live (a suite limit, not a library fault)"
	}
	me.Stored = append(me.Stored, fmt.Sprintf("clock lead: the model's last instant %s is %s ahead of the wall clock (ClockLead %s)%s",
		clockString(r.modelAt), lead, ClockLead, note))
	return me
}

func asMismatch(err error, me **MismatchError) bool {
	m, ok := err.(*MismatchError)
	*me = m
	return ok
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

// cellText is a stored cell with its expiry on an age family.
func (r *runner) cellText(c model.Cell) string {
	p := r.cfg.Schema[c.Family]
	if k := p.Kind(); (k != strategy.KindOneSecond && k != strategy.KindDefaultExpiry) || strings.HasPrefix(c.Column, model.CompanionPrefix) {
		return c.String()
	}
	return fmt.Sprintf("%s (expires %s)", c, clockString(p.ExpiryTime(bigtable.Timestamp(c.TS))))
}

// serverStored is what the server stores in rows, read raw and
// unfiltered (nil without Config.Raw, or when the read fails).
func (r *runner) serverStored(rows []string) map[string][]model.Cell {
	if r.cfg.Raw == nil || len(rows) == 0 {
		return nil
	}
	out := map[string][]model.Cell{}
	_ = r.cfg.Raw.ReadRows(r.ctx, bigtable.RowList(rows), func(row bigtable.Row) bool {
		out[row.Key()] = fromRow(row)
		return true
	})
	return out
}

// idleDecisions records, for the cells a read returned at t from the
// families with an idle TTL (each column's newest), the model's
// time-to-idle decision with its figures: the remaining TTL against the
// refresh threshold (the idle TTL less the debounce).
func (r *runner) idleDecisions(what string, read []model.Cell, due []model.Cell, t int64) {
	isDue := map[model.Cell]bool{}
	for _, c := range due {
		isDue[c] = true
	}
	for i := 0; i < len(read); {
		newest, j := i, i+1
		for ; j < len(read) && read[j].Row == read[i].Row && read[j].Family == read[i].Family && read[j].Column == read[i].Column; j++ {
			if read[j].TS > read[newest].TS {
				newest = j
			}
		}
		c := read[newest]
		i = j
		ttl, debounce, threshold, ok := r.m.IdleFigures(c.Family)
		if !ok {
			continue
		}
		left, _ := r.cfg.Schema[c.Family].Remaining(bigtable.Timestamp(c.TS), bigtable.Timestamp(t))
		verdict := "not due"
		if isDue[c] {
			verdict = "due"
		}
		r.logRows(fmt.Sprintf("time-to-idle: %s returned %s at %d: %s left, idle TTL %s, debounce %g (refresh under %s left): the model says %s",
			what, c, t, time.Duration(left)*time.Microsecond, ttl, debounce, time.Duration(threshold)*time.Microsecond, verdict), c.Row)
	}
}

// IdleRecorder is a ttlclient.Recorder counting the table's time-to-idle
// results (ttlclient.IdleRecorder) and failures: set as Config.Idle, the
// suite compares what the library did after each read with the model's
// decisions. The other observations are ignored.
type IdleRecorder struct {
	mu       sync.Mutex
	counts   IdleCounts
	failures []string
}

// IdleCounts are time-to-idle results by ttlclient.IdleResult.
type IdleCounts [ttlclient.IdleConflict + 1]int

func (c IdleCounts) sub(d IdleCounts) IdleCounts {
	for i := range c {
		c[i] -= d[i]
	}
	return c
}

func (c IdleCounts) String() string {
	var parts []string
	for i, n := range c {
		parts = append(parts, fmt.Sprintf("%s %d", ttlclient.IdleResult(i), n))
	}
	return strings.Join(parts, ", ")
}

// Counts is what the library reported so far, and the reasons of its
// failed refreshes.
func (rec *IdleRecorder) Counts() (IdleCounts, []string) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.counts, append([]string(nil), rec.failures...)
}

func (rec *IdleRecorder) Table(string, ttlclient.Schema) ttlclient.TableRecorder { return rec }
func (rec *IdleRecorder) IdleRefresh(_ string, result ttlclient.IdleResult, n int) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if int(result) < len(rec.counts) {
		rec.counts[result] += n
	}
}
func (rec *IdleRecorder) IdleRefreshFailed(family, reason string) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.failures = append(rec.failures, family+": "+reason)
}
func (rec *IdleRecorder) Read(time.Duration)                               {}
func (rec *IdleRecorder) Write(time.Duration)                              {}
func (rec *IdleRecorder) CellWritten(string, strategy.Kind, time.Duration) {}
func (rec *IdleRecorder) Refused(string, string)                           {}
func (rec *IdleRecorder) ExpiredCell(string, strategy.Kind, time.Duration) {}
func (rec *IdleRecorder) ShadowRead(int, error)                            {}
func (rec *IdleRecorder) ShadowDropped()                                   {}
func (rec *IdleRecorder) VerifySkipped()                                   {}

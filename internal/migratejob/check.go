package migratejob

import (
	"bytes"
	"context"
	"strings"
	"sync"

	"cloud.google.com/go/bigtable"

	scan "github.com/bttl/bttl/internal/scanjob"
)

// CopyCheck is what CheckCopy found: the target family's cells set
// against the source's.
type CopyCheck struct {
	Rows int64 `json:"rows"`
	// TargetCells were read in the target family; Matched of them are the
	// copy of a stored source cell (same column, the timestamp the copy
	// gives it, same value).
	TargetCells int64 `json:"target_cells"`
	Matched     int64 `json:"matched"`
	// OnlyInTarget: target cells whose source cell is not stored (deleted
	// after the copy, without the Mirror; or written to the target by a
	// writer already switched to it). ValueDiffers: the source cell at
	// that slot holds another value (overwritten after the copy).
	OnlyInTarget int64 `json:"only_in_target"`
	ValueDiffers int64 `json:"value_differs"`
	// Cells lists every one of them (What "only_in_target" or
	// "value_differs"; Family the target), in key order.
	Cells []ReportCell `json:"cells"`
}

// Clean reports whether every target cell is the copy of a stored
// source cell.
func (c *CopyCheck) Clean() bool { return c.OnlyInTarget == 0 && c.ValueDiffers == 0 }

// CheckCopy reads the source and target families of a copy plan and
// reports every target cell that is not the copy of a stored source cell:
// the proof that the target serves nothing the source lacks. It writes
// nothing. It is exact while the target is written by the copy alone (no
// writer switched to it yet, docs/design.md#migrate): a target cell
// without its source is then a deletion in the source that was not
// mirrored (Mirror), which the target would serve. Once writers write the
// target, their cells are listed too. scan options as for Run (no
// checkpoint: the check is read again whole).
func (m *Migrator) CheckCopy(ctx context.Context, opts ...scan.Option) (*CopyCheck, error) {
	if m.plan.inPlace() {
		return nil, &PlanError{Field: "ToFamily", Reason: "empty: an in-place plan copies nothing to check"}
	}
	if scan.HasCheckpoint(opts...) {
		// A checkpoint would skip the ranges an earlier check finished,
		// and a check that did not read them proves nothing about them.
		return nil, &scan.OptionError{Option: "checkpoint", Reason: "CheckCopy reads every range every time: a proof cannot resume"}
	}
	out := &CopyCheck{Cells: []ReportCell{}}
	var mu sync.Mutex
	opts = append(append([]scan.Option(nil), opts...), scan.WithFilter(m.Filter()))
	_, err := scan.Run(ctx, m.tbl, m.table, func(_ context.Context, r bigtable.Row) error {
		tgt := r[m.plan.ToFamily]
		if len(tgt) == 0 {
			return nil
		}
		type slot struct {
			q  string
			ts bigtable.Timestamp
		}
		copies := map[slot][]byte{}
		prefix := len(m.plan.Family) + 1
		for _, it := range r[m.plan.Family] {
			q := it.Column[prefix:]
			if n, ok := m.plan.newTimestamp(it.Row, q, it.Timestamp); ok {
				copies[slot{q, n}] = it.Value
			}
		}
		var found []ReportCell
		var matched int64
		for _, it := range tgt {
			q := strings.TrimPrefix(it.Column, m.plan.ToFamily+":")
			v, ok := copies[slot{q, it.Timestamp}]
			if ok && bytes.Equal(v, it.Value) {
				matched++
				continue
			}
			what := "only_in_target"
			if ok {
				what = "value_differs"
			}
			c := m.reportCell(Example{Row: it.Row, Column: q, Old: it.Timestamp}, what)
			c.Family = m.plan.ToFamily
			found = append(found, c)
		}
		mu.Lock()
		defer mu.Unlock()
		out.Rows++
		out.TargetCells += int64(len(tgt))
		out.Matched += matched
		for _, c := range found {
			if c.What == "only_in_target" {
				out.OnlyInTarget++
			} else {
				out.ValueDiffers++
			}
		}
		out.Cells = append(out.Cells, found...)
		return nil
	}, opts...)
	sortCells(out.Cells)
	return out, err
}

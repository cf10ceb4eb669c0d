package lifecycle

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/protobuf/proto"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/strategy"
)

// purgeHidden deletes the cells of family:column that a max-versions age
// family (strategy.WithMaxVersions) hides: those beyond the column's newest
// N live ones, which GC's max-versions rule removes and no read returns.
// A move to an older timestamp must not run while they are stored: the
// moved cell would sort below them and bring them back into view as live
// versions (and push a live one out). They are dead, so deleting them
// changes nothing any read sees. A family without the rule has none.
func (o *Ops) purgeHidden(ctx context.Context, row, family, column string, p strategy.Policy) error {
	n := p.VersionLimit()
	if n == 0 {
		return nil
	}
	r, err := o.ReadRow(ctx, row, bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(family, column, column+"\x00"),
		bigtable.TimestampRangeFilterMicros(p.LiveFrom(o.now()), 0),
		bigtable.StripValueFilter(),
	))
	if err != nil {
		return err
	}
	cells := r[family] // newest first
	if len(cells) <= n {
		return nil
	}
	return o.PurgeBelow(ctx, row, family, column, p, strategy.Millis(cells[n-1].Timestamp))
}

// PurgeBelow deletes family:column's cells under below, the n-th newest
// live cell's millisecond when purgeHidden read the column, and their
// companions.
func (o *Ops) PurgeBelow(ctx context.Context, row, family, column string, p strategy.Policy, below bigtable.Timestamp) error {
	n := p.VersionLimit()
	m := bigtable.NewMutation()
	m.DeleteTimestampRange(family, column, 0, below)
	if p.HasCompanions() {
		m.DeleteTimestampRange(family, strategy.WriteTimeColumn(column), 0, below)
	}
	// Only while at least n cells are still stored from below on: then
	// every cell under it is beyond the n newest, collectable by GC's
	// max-versions rule whatever moved meanwhile (a concurrent Expire may
	// have moved a live cell under below, and the column have fewer).
	atLeastN := bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(family, column, column+"\x00"),
		bigtable.TimestampRangeFilterMicros(below, 0),
		bigtable.CellsPerRowOffsetFilter(n-1),
	)
	return o.CheckAndMutate(ctx, row, bigtable.NewCondMutation(atLeastN, m, nil))
}

// ExpireColumn is ttlclient's Table.ExpireColumn.
func (o *Ops) ExpireColumn(ctx context.Context, row, family, column string, ttl time.Duration, s Settings) (moved int, err error) {
	if _, _, err := o.expireTimestamp(row, family, column, ttl); err != nil {
		return 0, err
	}
	return o.expireColumn(ctx, row, family, column, s, o.ttlTarget(ttl))
}

// ExpireColumnAt is ttlclient's Table.ExpireColumnAt.
func (o *Ops) ExpireColumnAt(ctx context.Context, row, family, column string, at time.Time, s Settings) (moved int, err error) {
	p, err := o.lifecyclePolicy(row, family, column)
	if err != nil {
		return 0, err
	}
	if _, _, err := AtTimestamp(p, o.Clock.Now(), at); err != nil {
		return 0, o.Refuse(Cell{Row: row, Family: family, Column: column}, err)
	}
	return o.expireColumn(ctx, row, family, column, s, o.atTarget(at))
}

func (o *Ops) expireColumn(ctx context.Context, row, family, column string, s Settings, target targetFunc) (int, error) {
	cells, err := o.liveCells(ctx, row, family, column, s, false)
	if err != nil {
		return 0, err
	}
	if len(cells) == 0 {
		s.report(family, column, 0, NoCell)
		return 0, nil
	}
	return o.expireCells(ctx, row, family, column, cells, s, target)
}

// targetFunc is where the newest cell of a column of p goes, at the
// clock reading it is called at: past when the instant is already past
// (every cell of the column is deleted).
type targetFunc func(p strategy.Policy) (ts bigtable.Timestamp, past bool, err error)

// ttlTarget is the target of a write with ttl now.
func (o *Ops) ttlTarget(ttl time.Duration) targetFunc {
	return func(p strategy.Policy) (bigtable.Timestamp, bool, error) {
		ts, err := p.WriteTimestamp(o.Clock.Now(), ttl)
		return ts, false, err
	}
}

// atTarget is the target of a cell expiring at the instant at (AtTimestamp).
func (o *Ops) atTarget(at time.Time) targetFunc {
	return func(p strategy.Policy) (bigtable.Timestamp, bool, error) {
		return AtTimestamp(p, o.Clock.Now(), at)
	}
}

// report passes one cell's result to the ExpireResultsTo callback.
func (s Settings) report(family, column string, ts bigtable.Timestamp, r Result) {
	if s.OnCell != nil {
		s.OnCell(family, column, ts, r)
	}
}

// ExpireRow is ttlclient's Table.ExpireRow.
func (o *Ops) ExpireRow(ctx context.Context, row string, ttl time.Duration, s Settings) (moved int, err error) {
	return o.expireRow(ctx, row, s, o.ttlTarget(ttl), Cell{Row: row, TTL: ttl})
}

// ExpireRowAt is ttlclient's Table.ExpireRowAt.
func (o *Ops) ExpireRowAt(ctx context.Context, row string, at time.Time, s Settings) (moved int, err error) {
	return o.expireRow(ctx, row, s, o.atTarget(at), Cell{Row: row})
}

func (o *Ops) expireRow(ctx context.Context, row string, s Settings, target targetFunc, about Cell) (moved int, err error) {
	if err := o.CheckRowKey(row); err != nil {
		return 0, err
	}
	var families []string
	for fam := range o.Schema {
		if _, err := o.agePolicy(fam); err == nil {
			families = append(families, fam)
		}
	}
	if len(families) == 0 {
		return 0, o.Refuse(about, fmt.Errorf("%w: the table has no one-second or default-expiry family", rules.ErrNotApplicable))
	}
	sort.Strings(families) // the first refusing family by name, every time
	for _, fam := range families {
		if _, _, err := target(o.Schema[fam]); err != nil {
			about.Family = fam
			return 0, o.Refuse(about, err)
		}
	}
	r, err := o.ReadRow(ctx, row, o.Filters.TTL(o.now()))
	if err != nil {
		return 0, err
	}
	for _, fam := range families {
		for _, it := range r[fam] {
			if err := o.checkPinnable(row, fam, strings.TrimPrefix(it.Column, fam+":"), it); err != nil {
				return 0, err
			}
		}
	}
	for _, fam := range families {
		items := r[fam]
		for i := 0; i < len(items); {
			j := i + 1
			for j < len(items) && items[j].Column == items[i].Column {
				j++
			}
			column := strings.TrimPrefix(items[i].Column, fam+":")
			n, err := o.expireCells(ctx, row, fam, column, items[i:j], s, target)
			moved += n
			if err != nil {
				return moved, err
			}
			i = j
		}
	}
	return moved, nil
}

// expireCells moves the live cells of one column (newest first, as read)
// so that the newest gets the target and the others keep their spacing;
// a past target deletes them all.
func (o *Ops) expireCells(ctx context.Context, row, family, column string, cells []bigtable.ReadItem, s Settings, targetOf targetFunc) (int, error) {
	if len(cells) == 0 {
		return 0, nil
	}
	p, err := o.lifecyclePolicy(row, family, column)
	if err != nil {
		return 0, err
	}
	ts, past, err := targetOf(p)
	if err != nil {
		return 0, o.Refuse(Cell{Row: row, Family: family, Column: column}, err)
	}
	// delta 0: every cell is already where it goes; MoveCell counts each
	// live one without sending anything.
	delta := ts - strategy.Millis(cells[0].Timestamp)
	if past || delta < 0 {
		if err := o.purgeHidden(ctx, row, family, column, p); err != nil {
			return 0, err
		}
	}
	for _, c := range cells {
		if err := o.checkPinnable(row, family, column, c); err != nil {
			return 0, err
		}
	}
	order := make([]int, len(cells))
	for i := range order {
		order[i] = i
		if past || delta < 0 { // shortening: oldest first, so no target is a cell not yet moved
			order[i] = len(cells) - 1 - i
		}
	}
	moved := 0
	for _, i := range order {
		c := cells[i]
		target := strategy.Millis(c.Timestamp) + delta // no overflow: between c's and ts
		if past {
			target = -1000 // before the epoch: never live, a delete
		} else if target < 0 {
			// Before the epoch: deleted (a target before the epoch is never
			// live) when its new expiry is past; else the earliest
			// timestamp, 0 (live on a family whose D is longer than the
			// time since the epoch, which expires it later than asked
			// rather than lose a live cell).
			if p.ExpiryTime(target).After(o.Clock.Now()) {
				target = 0
			} else {
				target = -1000
			}
		}
		r, err := o.expireOne(ctx, row, family, column, p, c, target, Settings{Cond: s.Cond}, MoveNoCrossing)
		s.report(family, column, c.Timestamp, r)
		if err != nil {
			return moved, err
		}
		if r == Set || r == Deleted {
			moved++
		}
	}
	return moved, nil
}

// checkPinnable refuses, as MoveCell would, a cell whose value is too large
// to pin: ExpireColumn and ExpireRow check every cell they read before the
// first move, so such a cell found late leaves nothing moved in part.
func (o *Ops) checkPinnable(row, family, column string, c bigtable.ReadItem) error {
	if _, err := filters.Cell(family, column, strategy.Millis(c.Timestamp), c.Value); err != nil {
		return o.Refuse(Cell{Row: row, Family: family, Column: column, Timestamp: c.Timestamp}, err)
	}
	return nil
}

// SetKeepTTL is ttlclient's Table.SetKeepTTL.
func (o *Ops) SetKeepTTL(ctx context.Context, row, family, column string, value []byte) (Result, error) {
	p, err := o.lifecyclePolicy(row, family, column)
	if err != nil {
		return NoCell, err
	}
	if len(value) > rules.MaxValueBytes {
		return NoCell, o.Refuse(Cell{Row: row, Family: family, Column: column}, fmt.Errorf("%w: %d bytes", rules.ErrValueTooLarge, len(value)))
	}
	cells, err := o.liveCells(ctx, row, family, column, Settings{}, true)
	if err != nil || len(cells) == 0 {
		return NoCell, err
	}
	c := cells[0]
	ms := strategy.Millis(c.Timestamp)
	pin, err := filters.Cell(family, column, ms, c.Value)
	if err != nil {
		return NoCell, o.Refuse(Cell{Row: row, Family: family, Column: column, Timestamp: c.Timestamp}, err)
	}
	if ms < strategy.MaxTimestamp {
		pin = bigtable.ConditionFilter(NewerCells(family, column, ms), bigtable.BlockAllFilter(), pin)
	}
	now := o.now()
	if !p.IsLive(ms, now) {
		return NoCell, nil
	}
	m := KeepTTLMutation(p, family, column, ms, value, now)
	var applied bool
	if err := o.CheckAndMutate(ctx, row, bigtable.NewCondMutation(pin, m, nil), bigtable.GetCondMutationResult(&applied)); err != nil {
		return Changed, err
	}
	if !applied {
		return Changed, nil
	}
	return Set, nil
}

// SetColumnsKeepTTL is ttlclient's Table.SetColumnsKeepTTL: columns
// (sorted, distinct) get values, each at its newest live cell's
// millisecond, in one conditional mutation pinning every such cell, each
// still its column's newest.
func (o *Ops) SetColumnsKeepTTL(ctx context.Context, row, family string, columns []string, values [][]byte) (Result, error) {
	p, err := o.lifecyclePolicy(row, family, columns[0])
	if err != nil {
		return NoCell, err
	}
	has := make([]bigtable.Filter, len(columns))
	for i, c := range columns {
		if err := checkReserved(p, c); err != nil {
			return NoCell, o.Refuse(Cell{Row: row, Family: family, Column: c}, err)
		}
		if len(values[i]) > rules.MaxValueBytes {
			return NoCell, o.Refuse(Cell{Row: row, Family: family, Column: c}, fmt.Errorf("%w: %d bytes", rules.ErrValueTooLarge, len(values[i])))
		}
		has[i] = bigtable.ColumnRangeFilter(family, c, c+"\x00")
	}
	var user bigtable.Filter = has[0]
	if len(has) > 1 {
		user = bigtable.InterleaveFilters(has...)
	}
	r, err := o.ReadRow(ctx, row, o.Filters.Compose(o.now(), bigtable.ChainFilters(user, bigtable.LatestNFilter(1))))
	if err != nil {
		return NoCell, err
	}
	newest := map[string]bigtable.ReadItem{}
	for _, it := range r[family] {
		newest[strings.TrimPrefix(it.Column, family+":")] = it
	}
	if len(newest) < len(columns) {
		return NoCell, nil // FXX: not every column holds a live cell
	}
	var rm filters.RowMove
	var guards []bigtable.Filter
	guardBytes := 16
	for _, c := range columns {
		it := newest[c]
		ms := strategy.Millis(it.Timestamp)
		ok, err := rm.Add(family, c, ms, it.Value, "", 0)
		if err == nil && !ok {
			err = fmt.Errorf("%w: the %d cells do not fit in one predicate of %d bytes", filters.ErrCellTooLargeToPin, len(columns), filters.MaxFilterBytes)
		}
		if err != nil {
			return NoCell, o.Refuse(Cell{Row: row, Family: family, Column: c, Timestamp: it.Timestamp}, err)
		}
		if ms < strategy.MaxTimestamp {
			guardBytes += len(family) + 2*len(c) + 40
			guards = append(guards, NewerCells(family, c, ms))
		}
	}
	if n := proto.Size(rm.Proto()) + guardBytes; n > filters.MaxFilterBytes {
		return NoCell, o.Refuse(Cell{Row: row, Family: family}, fmt.Errorf("%w: the %d cells need a predicate of about %d bytes (limit %d)", filters.ErrCellTooLargeToPin, len(columns), n, filters.MaxFilterBytes))
	}
	pred := rm.Filter()
	switch len(guards) {
	case 0:
	case 1:
		pred = bigtable.ConditionFilter(guards[0], bigtable.BlockAllFilter(), pred)
	default:
		pred = bigtable.ConditionFilter(bigtable.InterleaveFilters(guards...), bigtable.BlockAllFilter(), pred)
	}
	now := o.now()
	m := bigtable.NewMutation()
	for i, c := range columns {
		ms := strategy.Millis(newest[c].Timestamp)
		if !p.IsLive(ms, now) {
			return NoCell, nil // expired since the read: not every column exists
		}
		AddKeepTTL(m, p, family, c, ms, values[i], now)
	}
	var applied bool
	if err := o.CheckAndMutate(ctx, row, bigtable.NewCondMutation(pred, m, nil), bigtable.GetCondMutationResult(&applied)); err != nil {
		return Changed, err
	}
	if !applied {
		return Changed, nil
	}
	return Set, nil
}

// MaxWriteTime is ttlclient's Table.MaxWriteTime.
func (o *Ops) MaxWriteTime(ctx context.Context, row, family string, columns ...string) (time.Time, error) {
	if err := o.CheckRowKey(row); err != nil {
		return time.Time{}, err
	}
	p, err := o.agePolicy(family)
	if err == nil && !p.HasCompanions() {
		err = fmt.Errorf("%w: family %q does not record write times (strategy.WithWriteTime)", rules.ErrNotApplicable, family)
	}
	if err != nil {
		return time.Time{}, o.ReadError(Cell{Row: row, Family: family}, err)
	}
	now := o.now()
	if p.AllExpired(now) {
		return time.Time{}, o.ReadError(Cell{Row: row, Family: family}, rules.ErrNoWriteTime)
	}
	r, err := o.ReadRow(ctx, row, bigtable.ChainFilters(
		bigtable.ColumnRangeFilter(family, "", ""),
		bigtable.TimestampRangeFilterMicros(p.LiveFrom(now), 0),
	))
	if err != nil {
		return time.Time{}, err
	}
	wt, ok := MaxWriteTime(p, family, r[family], columns)
	if !ok {
		return time.Time{}, o.ReadError(Cell{Row: row, Family: family}, rules.ErrNoWriteTime)
	}
	return time.UnixMicro(int64(wt)).UTC(), nil
}

// ReadRowAndExpire is ttlclient's Table.ReadRowAndExpire.
func (o *Ops) ReadRowAndExpire(ctx context.Context, row string, filter bigtable.Filter, ttl time.Duration) (bigtable.Row, Result, error) {
	if ttl < time.Millisecond {
		// Below 1ms no family takes it (strategy.Policy.WriteTimestamp):
		// refused before the read, whatever the row holds, not only when
		// it returns an age family's cell.
		if err := o.CheckRowKey(row); err != nil {
			return nil, NoCell, err
		}
		_, err := strategy.OneSecond().WriteTimestamp(o.Clock.Now(), ttl)
		return nil, NoCell, o.Refuse(Cell{Row: row, TTL: ttl}, err)
	}
	return o.readRowAndMove(ctx, row, filter, false, func(p strategy.Policy) (bigtable.Timestamp, error) {
		return p.WriteTimestamp(o.Clock.Now(), ttl)
	})
}

// ReadRowAndExpireAt is ttlclient's Table.ReadRowAndExpireAt.
func (o *Ops) ReadRowAndExpireAt(ctx context.Context, row string, filter bigtable.Filter, at time.Time) (bigtable.Row, Result, error) {
	if err := CheckInstant(at); err != nil {
		// Before the read, whatever the row holds.
		if err := o.CheckRowKey(row); err != nil {
			return nil, NoCell, err
		}
		return nil, NoCell, o.Refuse(Cell{Row: row}, err)
	}
	return o.readRowAndMove(ctx, row, filter, false, func(p strategy.Policy) (bigtable.Timestamp, error) {
		ts, past, err := AtTimestamp(p, o.Clock.Now(), at)
		if past {
			ts = -1000 // before the epoch: never live, so the move deletes
		}
		return ts, err
	})
}

// ReadRowAndPersist is ttlclient's Table.ReadRowAndPersist.
func (o *Ops) ReadRowAndPersist(ctx context.Context, row string, filter bigtable.Filter) (bigtable.Row, Result, error) {
	return o.readRowAndMove(ctx, row, filter, true, func(p strategy.Policy) (bigtable.Timestamp, error) {
		return Forever(p, o.Clock.Now())
	})
}

func (o *Ops) readRowAndMove(ctx context.Context, row string, filter bigtable.Filter, persist bool, target func(strategy.Policy) (bigtable.Timestamp, error)) (bigtable.Row, Result, error) {
	if err := o.CheckRowKey(row); err != nil {
		return nil, NoCell, err
	}
	r, err := o.ReadRow(ctx, row, o.Filters.Compose(o.now(), filter))
	if err != nil {
		return nil, NoCell, err
	}
	moves, fam, err := PlanRowMove(r, o.Policy, target)
	if err != nil {
		return r, NoCell, o.Refuse(Cell{Row: row, Family: fam}, err)
	}
	if persist {
		// Persist only lengthens: a cell already without a TTL stays
		// where it is (Persist's XX), and so, on a clamping family, where
		// "forever" is the cap, does a cell already living longer than
		// the cap (written before it, or by a plain client).
		kept := moves[:0]
		for _, mv := range moves {
			if mv.Target > mv.TS {
				kept = append(kept, mv)
			}
		}
		moves = kept
	}
	if len(moves) == 0 {
		for fam := range r {
			if _, err := o.agePolicy(fam); err == nil {
				return r, Set, nil // every age cell already at its target
			}
		}
		return r, NoCell, nil // no age-family cell (sequence and unmanaged ones are left alone)
	}
	if _, _, err := RowMove(moves); err != nil { // the size, before any write
		return r, NoCell, o.Refuse(Cell{Row: row, Family: moves[0].Family}, err)
	}
	if read, gone, err := o.storedValues(ctx, row, moves); err != nil || gone {
		return r, Changed, err
	} else if read {
		if _, _, err := RowMove(moves); err != nil { // again with the values stored, before the purge writes
			return r, NoCell, o.Refuse(Cell{Row: row, Family: moves[0].Family}, err)
		}
	}
	for _, mv := range moves {
		if p, _ := o.Policy(mv.Family); mv.Target < mv.TS {
			if err := o.purgeHidden(ctx, row, mv.Family, mv.Column, p); err != nil {
				return r, Changed, err
			}
		}
	}
	for i := range moves {
		mv := &moves[i]
		if mv.WriteTime {
			if mv.Companion, err = o.readCompanion(ctx, row, mv.Family, mv.Column, mv.TS); err != nil {
				return r, Changed, err
			}
		}
	}
	now := o.now()
	kept := false
	for i := range moves {
		p, _ := o.Policy(moves[i].Family)
		if !p.IsLive(moves[i].TS, now) {
			return r, Changed, nil // expired since the read: not revived
		}
		moves[i].Keep = p.IsLive(moves[i].Target, now)
		kept = kept || moves[i].Keep
	}
	pred, m, err := RowMove(moves)
	if err != nil {
		return r, NoCell, o.Refuse(Cell{Row: row, Family: moves[0].Family}, err)
	}
	var applied bool
	if err := o.CheckAndMutate(ctx, row, bigtable.NewCondMutation(pred, m, nil), bigtable.GetCondMutationResult(&applied)); err != nil {
		return r, Changed, err
	}
	if !applied {
		return r, Changed, nil
	}
	if !kept {
		return r, Deleted, nil // ReadRowAndExpireAt of an instant already past
	}
	return r, Set, nil
}

// storedValues puts in moves the stored value of each cell read with an
// empty value: the caller's filter may strip values (StripValueFilter, a
// read-and-touch that does not fetch them), and the move must pin, and
// write back, the value stored, not the empty one returned (else the pin
// never matched and the call was ExpireChanged every time). One raw read
// of those cells' milliseconds; gone reports one no longer stored there
// (moved, rewritten or deleted since the read: ExpireChanged). A value
// that is really empty is read again and stays empty. read reports
// whether there was any such cell.
func (o *Ops) storedValues(ctx context.Context, row string, moves []Move) (read, gone bool, err error) {
	var fs []bigtable.Filter
	for _, mv := range moves {
		if len(mv.Value) == 0 {
			fs = append(fs, bigtable.ChainFilters(
				bigtable.ColumnRangeFilter(mv.Family, mv.Column, mv.Column+"\x00"),
				bigtable.TimestampRangeFilterMicros(mv.TS, strategy.MilliEnd(mv.TS)),
			))
		}
	}
	if len(fs) == 0 {
		return false, false, nil
	}
	f := fs[0]
	if len(fs) > 1 {
		f = bigtable.InterleaveFilters(fs...)
	}
	stored, err := o.ReadRow(ctx, row, f)
	if err != nil {
		return true, false, err
	}
	for i := range moves {
		mv := &moves[i]
		if len(mv.Value) != 0 {
			continue
		}
		found := false
		for _, it := range stored[mv.Family] {
			if strings.TrimPrefix(it.Column, mv.Family+":") == mv.Column && strategy.Millis(it.Timestamp) == mv.TS {
				mv.Value, found = it.Value, true
				break
			}
		}
		if !found {
			return true, true, nil
		}
	}
	return true, false, nil
}

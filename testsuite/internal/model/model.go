package model

import (
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"time"

	"github.com/bttl/bttl/strategy"
)

// Cell is one cell of a read, with its stored timestamp in microseconds.
type Cell struct {
	Row, Family, Column string
	TS                  int64
	Value               string
}

func (c Cell) String() string {
	return fmt.Sprintf("%s/%s:%s@%d=%q", c.Row, c.Family, c.Column, c.TS, c.Value)
}

// OpKind is the kind of one operation of a mutation.
type OpKind uint8

// The operations the model knows, mirroring ttlclient.Mutation.
const (
	SetTTL       OpKind = iota // Set with WithTTL
	SetSeq                     // Set with WithSequence
	SetAuto                    // Set with bigtable.ServerTime and no option
	SetExplicit                // Set with an explicit timestamp
	DeleteColumn               // DeleteCellsInColumn
	DeleteRange                // DeleteTimestampRange [TS, End), End 0 = infinity
	DeleteFamily               // DeleteCellsInFamily
	DeleteRow                  // DeleteRow
)

// Op is one operation of a mutation.
type Op struct {
	Kind           OpKind
	Family, Column string
	TTL            time.Duration
	Seq            int64
	TS, End        int64
	Value          string
}

func (o Op) String() string {
	switch o.Kind {
	case SetTTL:
		return fmt.Sprintf("set %s:%s ttl=%s %q", o.Family, o.Column, o.TTL, o.Value)
	case SetSeq:
		return fmt.Sprintf("set %s:%s seq=%d %q", o.Family, o.Column, o.Seq, o.Value)
	case SetAuto:
		return fmt.Sprintf("set %s:%s auto %q", o.Family, o.Column, o.Value)
	case SetExplicit:
		return fmt.Sprintf("set %s:%s ts=%d %q", o.Family, o.Column, o.TS, o.Value)
	case DeleteColumn:
		return fmt.Sprintf("delete %s:%s", o.Family, o.Column)
	case DeleteRange:
		return fmt.Sprintf("delete %s:%s [%d,%d)", o.Family, o.Column, o.TS, o.End)
	case DeleteFamily:
		return fmt.Sprintf("delete family %s", o.Family)
	case DeleteRow:
		return "delete row"
	}
	return fmt.Sprintf("op(%d)", o.Kind)
}

// ErrRefused is what Apply returns for a mutation the library must refuse
// (before any RPC, so nothing of it is written). Every refusal is a
// *Refusal, which names its class.
var ErrRefused = errors.New("model: refused")

// Class is the kind of a refusal, one per sentinel error of the library
// (strategy.ErrInvalidTTL and so on; the wire guard's rules map to the
// same classes). The model names classes itself so as not to import the
// library.
type Class string

// The refusal classes.
const (
	ClassInvalidTTL      Class = "invalid-ttl"       // strategy.ErrInvalidTTL
	ClassTTLTooLong      Class = "ttl-too-long"      // strategy.ErrTTLTooLong
	ClassOverflow        Class = "overflow"          // strategy.ErrTimestampOverflow
	ClassBeforeEpoch     Class = "before-epoch"      // strategy.ErrBeforeEpoch
	ClassInvalidSequence Class = "invalid-sequence"  // strategy.ErrInvalidSequence
	ClassServerTimestamp Class = "server-timestamp"  // strategy.ErrServerTimestamp
	ClassExpired         Class = "expired"           // strategy.ErrAlreadyExpired
	ClassWrongOption     Class = "wrong-cell-option" // strategy.ErrWrongCellOption
	ClassUnknownFamily   Class = "unknown-family"    // ttlclient.ErrUnknownFamily
	ClassNotApplicable   Class = "not-applicable"    // ttlclient.ErrNotApplicable: Expire on a family without an age rule
	ClassReservedColumn  Class = "reserved-column"   // ttlclient.ErrReservedColumn: a qualifier from 0xFF 0xFF on in a write-time family
	ClassInvalid         Class = "invalid-request"   // an empty row key, no operations, an empty range
)

// Refusal is a refused operation: its class and why.
type Refusal struct {
	Class  Class
	Reason string
}

func (e *Refusal) Error() string { return fmt.Sprintf("%v (%s): %s", ErrRefused, e.Class, e.Reason) }

// Is makes errors.Is(err, ErrRefused) hold for every refusal.
func (e *Refusal) Is(target error) bool { return target == ErrRefused }

// ClassOf is the class of a refusal the model returned, "" for nil or an
// error that is not one.
func ClassOf(err error) Class {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Class
	}
	return ""
}

// Semantics is what a client path can express and how it checks it: the
// model of ttlclient (the zero value) or of a plain client through the
// wire guard.
type Semantics struct {
	// Wire: the path is a plain *bigtable.Client through the wire guard. It
	// has no default timestamp to assign (a SetAuto is a server timestamp,
	// refused on a managed family) and never rewrites a timestamp (an
	// explicit timestamp over a family's max TTL is refused even where
	// ttlclient clamps it).
	Wire bool
	// Wire paths also check every timestamp of a mutation before its
	// write-time qualifiers (the guard's order); ttlclient checks each
	// operation in turn.
	//
	// StampTTL: the program turns each TTL into a timestamp while it
	// builds the mutation (ttlclient.Table.Timestamp for a
	// *bigtable.Mutation), so a TTL's refusal comes before any check of
	// the mutation as a whole, whatever the operations' order.
	StampTTL bool
}

// family is one column family's parameters, read from its policy.
type family struct {
	kind        strategy.Kind
	d           int64 // max age in microseconds (age kinds)
	defaultTTL  time.Duration
	versions    int
	singleValue bool
	writeTime   bool          // every cell has a write-time companion
	maxTTL      time.Duration // the cap on a cell's TTL (0: none)
	clampTTL    bool          // a TTL over maxTTL is lowered to it
	wire        bool          // the path's Semantics.Wire
}

type cell struct {
	ts    int64
	value string
	wt    int64 // the write time (microseconds, a whole millisecond) on a write-time family
	// shadowed: the cell was once beyond the N newest stored cells of its
	// column, so the server's max-versions GC may have removed it already.
	shadowed bool
}

// row: family -> column -> cells, timestamp descending.
type row map[string]map[string][]cell

// Model holds every cell written and not deleted (what a server that never
// ran GC would store) and computes views from it.
type Model struct {
	fams map[string]family
	rows map[string]row
	idle map[string]idleFamily // families with an idle TTL (idle.go)
	sem  Semantics
}

// New returns an empty model of a table with schema, written through
// ttlclient.
func New(schema strategy.Schema) *Model { return NewWith(schema, Semantics{}) }

// NewWith returns an empty model of a table with schema, written through a
// path with semantics sem.
func NewWith(schema strategy.Schema, sem Semantics) *Model {
	m := &Model{fams: map[string]family{}, rows: map[string]row{}, idle: idleFamilies(schema), sem: sem}
	for name, p := range schema {
		f := family{kind: p.Kind(), defaultTTL: p.DefaultTTL(), versions: p.Versions(), singleValue: p.IsSingleValue(), writeTime: p.HasWriteTime(),
			maxTTL: p.MaxTTL(), clampTTL: p.ClampsTTL(), wire: sem.Wire}
		switch p.Kind() {
		case strategy.KindOneSecond:
			f.d = int64(time.Second / time.Microsecond)
		case strategy.KindDefaultExpiry:
			f.d = int64(p.DefaultTTL() / time.Microsecond)
		}
		m.fams[name] = f
	}
	return m
}

// ms rounds down to the millisecond.
func ms(ts int64) int64 {
	r := ts % 1000
	if r < 0 {
		r += 1000
	}
	return ts - r
}

// live is the age test of docs/design.md#live-rule: one-second `ts > t`, default
// expiry `ts + D > t`; other kinds never expire by age.
func (f family) live(ts, t int64) bool {
	switch f.kind {
	case strategy.KindOneSecond:
		return ts > t
	case strategy.KindDefaultExpiry:
		return ts > t-f.d
	}
	return true
}

func refused(class Class, format string, a ...any) error {
	return &Refusal{Class: class, Reason: fmt.Sprintf(format, a...)}
}

// maxSeq: seq*1000 must sort below the real-time floor (2000-01-01).
const maxSeq = 946_684_800_000 - 1

// addNanos is now+d in microseconds: the exact sum in nanoseconds, rounded
// down once, and false when it does not fit in int64 microseconds. Big
// integers keep the model independent of the library's carry arithmetic.
func addNanos(now time.Time, d time.Duration) (int64, bool) {
	ns := new(big.Int).Mul(big.NewInt(now.Unix()), big.NewInt(int64(time.Second)))
	ns.Add(ns, big.NewInt(int64(now.Nanosecond())))
	ns.Add(ns, big.NewInt(int64(d)))
	us, rem := new(big.Int), new(big.Int)
	us.DivMod(ns, big.NewInt(int64(time.Microsecond)), rem) // Euclidean: rounds down
	if !us.IsInt64() {
		return 0, false
	}
	return us.Int64(), true
}

// timestamp is the stored timestamp of a Set at clock reading now, or a
// refusal, checked in the library's order (strategy.WriteTimestamp and
// CheckExplicit).
func (f family) timestamp(o Op, now time.Time) (int64, error) {
	managed := f.kind != strategy.KindUnmanaged
	nowMicros := now.UnixMicro()
	switch o.Kind {
	case SetTTL:
		if f.kind != strategy.KindOneSecond && f.kind != strategy.KindDefaultExpiry {
			return 0, refused(ClassWrongOption, "TTL on a %s family", f.kind)
		}
		if o.TTL < time.Millisecond {
			return 0, refused(ClassInvalidTTL, "TTL %s", o.TTL)
		}
		d := o.TTL
		if f.maxTTL > 0 && d > f.maxTTL {
			if !f.clampTTL {
				return 0, refused(ClassTTLTooLong, "TTL %s over the max TTL %s", d, f.maxTTL)
			}
			d = f.maxTTL
		}
		if f.kind == strategy.KindDefaultExpiry {
			d -= time.Duration(f.d) * time.Microsecond
		}
		ts, ok := addNanos(now, d)
		if !ok {
			return 0, refused(ClassOverflow, "now + %s", d)
		}
		if ts = ms(ts); ts < 0 {
			return 0, refused(ClassBeforeEpoch, "now + %s lands at %d", d, ts)
		}
		return ts, nil
	case SetSeq:
		if f.kind != strategy.KindSequence {
			return 0, refused(ClassWrongOption, "sequence on a %s family", f.kind)
		}
		if o.Seq < 1 || o.Seq > maxSeq {
			return 0, refused(ClassInvalidSequence, "sequence %d", o.Seq)
		}
		return o.Seq * 1000, nil
	case SetAuto:
		switch {
		case !managed:
			return 0, refused(ClassWrongOption, "no timestamp to assign on an unmanaged family")
		case f.wire:
			// A plain client sends bigtable.ServerTime: the guard
			// refuses it on every managed family.
			return 0, refused(ClassServerTimestamp, "a server timestamp on a %s family", f.kind)
		case f.kind == strategy.KindDefaultExpiry:
			if ms(nowMicros) < 0 {
				return 0, refused(ClassBeforeEpoch, "before the epoch")
			}
			return ms(nowMicros), nil
		case f.kind == strategy.KindOneSecond && f.defaultTTL > 0:
			return f.timestamp(Op{Kind: SetTTL, TTL: f.defaultTTL}, now)
		}
		return 0, refused(ClassServerTimestamp, "no timestamp to assign on a %s family", f.kind)
	case SetExplicit:
		if o.TS < 0 {
			return 0, refused(ClassBeforeEpoch, "negative timestamp")
		}
		ts := ms(o.TS)
		switch {
		case f.kind == strategy.KindSequence && (o.TS < 1000 || o.TS%1000 != 0 || o.TS >= maxSeq*1000+1000):
			return 0, refused(ClassInvalidSequence, "sequence timestamp %d", o.TS)
		case managed && f.kind != strategy.KindSequence && !f.live(ts, nowMicros):
			return 0, refused(ClassExpired, "expired on arrival")
		case f.maxTTL > 0 && f.expiry(ts)-nowMicros > int64(f.maxTTL/time.Microsecond):
			// The TTL the timestamp implies is over the cap: ttlclient
			// lowers it to the cap when the family clamps (at the clock
			// reading in microseconds, as strategy.CheckExplicit does),
			// the guard never rewrites a timestamp.
			if !f.clampTTL || f.wire {
				return 0, refused(ClassTTLTooLong, "timestamp %d implies a TTL over the max TTL %s", o.TS, f.maxTTL)
			}
			return f.timestamp(Op{Kind: SetTTL, TTL: f.maxTTL}, time.UnixMicro(nowMicros))
		}
		return ts, nil
	}
	return 0, refused(ClassInvalid, "not a set")
}

// Apply applies a mutation of row at clock reading now, atomically: either
// every op or, on a refusal, none. A TTL is added to now in nanoseconds and
// the sum truncated once, as the library must; now.UnixMicro() is the read
// time for the "expired on arrival" test.
func (m *Model) Apply(rowKey string, now time.Time, ops []Op) error {
	if rowKey == "" {
		return refused(ClassInvalid, "empty row key")
	}
	if len(ops) == 0 {
		return refused(ClassInvalid, "no operations")
	}
	// Check everything first: a refused mutation writes nothing.
	if m.sem.StampTTL {
		for _, o := range ops {
			if o.Kind != SetTTL {
				continue
			}
			f, ok := m.fams[o.Family]
			if !ok {
				return refused(ClassUnknownFamily, "unknown family %q", o.Family)
			}
			if _, err := f.timestamp(o, now); err != nil {
				return err
			}
		}
	}
	tss := make([]int64, len(ops))
	for i, o := range ops {
		if o.Kind == DeleteRow {
			continue
		}
		f, ok := m.fams[o.Family]
		if !ok {
			return refused(ClassUnknownFamily, "unknown family %q", o.Family)
		}
		switch o.Kind {
		case SetTTL, SetSeq, SetAuto, SetExplicit:
			ts, err := f.timestamp(o, now)
			if err != nil {
				return err
			}
			tss[i] = ts
			if err := f.reserved(o); err != nil && !m.sem.Wire {
				return err
			}
		case DeleteRange:
			if o.TS < 0 || o.End < 0 || (o.End != 0 && ms(o.End) <= ms(o.TS)) {
				return refused(ClassInvalid, "range [%d,%d)", o.TS, o.End)
			}
			if !m.sem.Wire && !m.sem.StampTTL && (o.TS%1000 != 0 || o.End%1000 != 0) {
				// ttlclient's Mutation refuses a bound that is not a whole
				// millisecond (ErrTimestampGranularity); a *bigtable.Mutation
				// (the wire and Table.API paths) truncates it in
				// DeleteTimestampRange, as below.
				return refused(ClassInvalid, "range [%d,%d) not in whole milliseconds", o.TS, o.End)
			}
		}
	}
	if m.sem.Wire {
		for _, o := range ops {
			if err := m.fams[o.Family].reserved(o); err != nil {
				return err
			}
		}
	}
	r := m.rows[rowKey]
	if r == nil {
		r = row{}
	}
	for i, o := range ops {
		switch o.Kind {
		case SetTTL, SetSeq, SetAuto, SetExplicit:
			if m.fams[o.Family].singleValue {
				r.deleteColumn(o.Family, o.Column, 0, 0)
			}
			r.set(o.Family, o.Column, cell{ts: tss[i], value: o.Value, wt: ms(now.UnixMicro())})
		case DeleteColumn:
			r.deleteColumn(o.Family, o.Column, 0, 0)
		case DeleteRange:
			r.deleteColumn(o.Family, o.Column, ms(o.TS), ms(o.End))
		case DeleteFamily:
			delete(r, o.Family)
		case DeleteRow:
			r = row{}
		}
	}
	m.markShadowed(r)
	if len(r) == 0 {
		delete(m.rows, rowKey)
	} else {
		m.rows[rowKey] = r
	}
	return nil
}

// reserved refuses a Set of a qualifier from 0xFF 0xFF on in a family with
// write times: those are the companions' (a forged one would give a cell a
// write time it does not have).
func (f family) reserved(o Op) error {
	switch o.Kind {
	case SetTTL, SetSeq, SetAuto, SetExplicit:
		if f.writeTime && strings.HasPrefix(o.Column, ReservedStart) {
			return refused(ClassReservedColumn, "qualifier %q in a write-time family", o.Column)
		}
	}
	return nil
}

func (r row) set(fam, col string, c cell) {
	cols := r[fam]
	if cols == nil {
		cols = map[string][]cell{}
		r[fam] = cols
	}
	cs := cols[col]
	i := sort.Search(len(cs), func(i int) bool { return cs[i].ts <= c.ts })
	if i < len(cs) && cs[i].ts == c.ts {
		cs[i] = c // same timestamp: the new value replaces the old
		return
	}
	cs = append(cs, cell{})
	copy(cs[i+1:], cs[i:])
	cs[i] = c
	cols[col] = cs
}

// deleteColumn deletes the cells of fam:col in [start, end); end 0 is
// infinity, so (0, 0) is the whole column.
func (r row) deleteColumn(fam, col string, start, end int64) {
	cols := r[fam]
	if cols == nil {
		return
	}
	kept := cols[col][:0]
	for _, c := range cols[col] {
		if c.ts >= start && (end == 0 || c.ts < end) {
			continue
		}
		kept = append(kept, c)
	}
	if len(kept) == 0 {
		delete(cols, col)
		if len(cols) == 0 {
			delete(r, fam)
		}
		return
	}
	cols[col] = kept
}

func (m *Model) markShadowed(r row) {
	for fam, cols := range r {
		n := m.fams[fam].versions
		if n == 0 {
			continue
		}
		for _, cs := range cols {
			for i := n; i < len(cs); i++ {
				cs[i].shadowed = true
			}
		}
	}
}

// Resurrects reports whether applying ops to row would bring a cell that
// was once beyond its column's N newest back among them. Bigtable's
// max-versions GC is asynchronous, so whether such a cell is still stored
// depends on when GC ran: no read can be checked exactly after that. The
// conformance suite avoids those mutations (a delete range [0, end) never
// causes one).
func (m *Model) Resurrects(rowKey string, now time.Time, ops []Op) bool {
	c := m.cloneRow(rowKey)
	if err := c.Apply(rowKey, now, ops); err != nil {
		return false
	}
	// Apply keeps an old cell's shadowed mark and gives a cell it writes a
	// fresh one (a write at a shadowed cell's timestamp replaces it, on the
	// server too, so that is no resurrection); markShadowed marks only cells
	// beyond the N newest. A marked cell among the N newest is therefore an
	// old shadowed one brought back.
	for fam, cols := range c.rows[rowKey] {
		n := m.fams[fam].versions
		if n == 0 {
			continue
		}
		for _, cs := range cols {
			for i := 0; i < n && i < len(cs); i++ {
				if cs[i].shadowed {
					return true
				}
			}
		}
	}
	return false
}

// KeepsFamily reports whether rowKey holds a cell of fam once ops are
// applied (or, if ops are refused, holds one now).
func (m *Model) KeepsFamily(rowKey string, now time.Time, ops []Op, fam string) bool {
	c := m.cloneRow(rowKey)
	if err := c.Apply(rowKey, now, ops); err != nil {
		c = m
	}
	return len(c.rows[rowKey][fam]) > 0
}

// cloneRow is a model holding a copy of rowKey alone, to try ops on.
func (m *Model) cloneRow(rowKey string) *Model {
	c := &Model{fams: m.fams, rows: map[string]row{}, sem: m.sem}
	if r := m.rows[rowKey]; r != nil {
		c.rows[rowKey] = r.clone()
	}
	return c
}

func (r row) clone() row {
	out := make(row, len(r))
	for fam, cols := range r {
		oc := make(map[string][]cell, len(cols))
		for col, cs := range cols {
			oc[col] = append([]cell(nil), cs...)
		}
		out[fam] = oc
	}
	return out
}

// RowKeys is every row holding a stored cell, sorted.
func (m *Model) RowKeys() []string {
	keys := make([]string, 0, len(m.rows))
	for k := range m.rows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Stored is every cell of rowKey written and not deleted, in Bigtable order,
// whatever GC would do: what a server that never ran GC stores.
func (m *Model) Stored(rowKey string) []Cell {
	return m.cells(rowKey, func(string, []cell) []cell { return nil }, true)
}

// View is what a complete GC at t keeps of rowKey, in Bigtable order:
// age families keep their live cells, a max-versions limit then keeps the N
// newest of those per column, unmanaged families keep everything.
func (m *Model) View(rowKey string, t int64) []Cell {
	return m.cells(rowKey, func(fam string, cs []cell) []cell {
		f := m.fams[fam]
		var out []cell
		for _, c := range cs {
			if f.live(c.ts, t) {
				out = append(out, c)
			}
		}
		if f.versions > 0 && len(out) > f.versions {
			out = out[:f.versions]
		}
		return out
	}, false)
}

func (m *Model) cells(rowKey string, keep func(fam string, cs []cell) []cell, all bool) []Cell {
	r := m.rows[rowKey]
	var out []Cell
	for _, fam := range sortedKeys(r) {
		cols := r[fam]
		for _, col := range sortedKeys(cols) {
			cs := cols[col]
			if !all {
				cs = keep(fam, cs)
			}
			for _, c := range cs {
				out = append(out, Cell{Row: rowKey, Family: fam, Column: col, TS: c.ts, Value: c.value})
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Read is what a read of rowKey at t through the library must return: the
// view at t, then the caller's filter (nil for none). Empty for a row with
// nothing left.
func (m *Model) Read(rowKey string, t int64, f Filter) []Cell {
	cs := m.View(rowKey, t)
	if f != nil && len(cs) > 0 {
		cs = f.Apply(cs)
	}
	return cs
}

// ReadRange is Read over the rows in [start, end) (end "" is infinity), in
// row-key order.
func (m *Model) ReadRange(start, end string, t int64, f Filter) []Cell {
	var out []Cell
	for _, k := range m.RowKeys() {
		if k < start || (end != "" && k >= end) {
			continue
		}
		out = append(out, m.Read(k, t, f)...)
	}
	return out
}

// Matches reports whether a check-and-mutate predicate f (nil: any cell)
// matches rowKey at t: the TTL view first, so an expired cell never
// satisfies a condition.
func (m *Model) Matches(rowKey string, t int64, f Filter) bool {
	return len(m.Read(rowKey, t, f)) > 0
}

// Format renders cells one per line, for diffs.
func Format(cs []Cell) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Check reports whether the library must refuse ops on rowKey at now,
// without applying them.
func (m *Model) Check(rowKey string, now time.Time, ops []Op) error {
	c := &Model{fams: m.fams, rows: map[string]row{}, sem: m.sem}
	return c.Apply(rowKey, now, ops)
}

// Versions is the max-versions limit of family (0 for none).
func (m *Model) Versions(family string) int { return m.fams[family].versions }

// Collectable reports whether the server's own GC, running at real time
// now, may have removed a stored cell: its age rule expired it, or its
// column's max-versions rule once put it beyond the N newest.
func (m *Model) Collectable(rowKey, fam, col string, ts, now int64) bool {
	if c, ok := companionColumn(col); ok && m.fams[fam].writeTime {
		col = c // a companion goes with its cell
	}
	f := m.fams[fam]
	if f.kind == strategy.KindOneSecond || f.kind == strategy.KindDefaultExpiry {
		// The server collects ts < now - maxAge; a millisecond of slack
		// for the server's clock reading.
		if ts < now-f.d+1000 {
			return true
		}
	}
	for _, c := range m.rows[rowKey][fam][col] {
		if c.ts == ts {
			return c.shadowed
		}
	}
	return false
}

package rules

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
)

// MaxValueBytes is the largest cell value Bigtable takes, checked before
// any RPC in ModeClient.
const MaxValueBytes = 100 << 20

// Mode says whose request the rules apply to: where bttl's client and
// the wire guard differ, the docs say how (docs/design.md#wire-guard).
type Mode uint8

const (
	// ModeGuard: a plain client's request, on the wire. A server
	// timestamp on a managed family is refused (the guard cannot know
	// whether the caller meant the default TTL); an unmanaged family's
	// cells are sent as they are; the limits the server checks itself
	// (value size, range bounds) are left to it, but a timestamp not in
	// whole milliseconds is refused (ErrTimestampGranularity): the
	// emulators do not refuse it as production does.
	ModeGuard Mode = iota
	// ModeClient: a bttl Table's request (ttlclient, and a Table.API
	// caller's mutation on a connection bttl dialled). A server timestamp
	// on a managed family gets the family's default TTL; an unmanaged
	// family's timestamps are truncated to the millisecond; value size,
	// range bounds and negative timestamps are refused before any RPC.
	ModeClient
)

// IntentKind is what a caller of ttlclient asked of a cell beside its
// proto: nothing (the proto's timestamp holds), a TTL or a sequence
// number.
type IntentKind uint8

const (
	IntentNone IntentKind = iota
	IntentTTL
	IntentSequence
)

// Intent is one cell's intent, beside the SetCell it belongs to: the wire
// carries none, ttlclient's SetTTL and SetVersion do.
type Intent struct {
	Kind IntentKind
	TTL  time.Duration
	Seq  int64
}

// Table is the rules of one table (or materialized view).
type Table struct {
	ID       string
	Schema   strategy.Schema
	Unlisted *strategy.Policy // families Schema does not name pass as it; nil: refused
	Mode     Mode
	// Probe is the wire guard's Verify probe family: a SetCell on it
	// (when the schema does not name it) is refused with ErrVerifyProbe.
	Probe string

	filters     *filters.Builder
	writeTime   bool
	singleValue bool
	hasAge      bool // some family expires by age: the TTL filter changes with time
	// ttl is the TTL filter of one millisecond, shared by the reads of
	// that millisecond: a request's filter is only read (marshalled), and
	// a caller's is chained after it, never into it.
	ttl atomic.Pointer[cachedTTL]
}

type cachedTTL struct {
	milli int64
	f     *btpb.RowFilter
}

// NewTable checks schema and returns its rules. fb is the table's filter
// builder (nil: one is made from schema).
func NewTable(id string, schema strategy.Schema, unlisted *strategy.Policy, mode Mode, fb *filters.Builder) (*Table, error) {
	if fb == nil {
		var err error
		if fb, err = filters.New(schema); err != nil {
			return nil, err
		}
	}
	t := &Table{ID: id, Schema: make(strategy.Schema, len(schema)), Unlisted: unlisted, Mode: mode, filters: fb}
	for f, p := range schema {
		t.Schema[f] = p
		t.writeTime = t.writeTime || p.HasWriteTime()
		t.singleValue = t.singleValue || p.IsSingleValue()
		t.hasAge = t.hasAge || p.MaxAge() > 0
	}
	return t, nil
}

// Filters is the table's filter builder.
func (t *Table) Filters() *filters.Builder { return t.filters }

// Policy is fam's policy: the schema's, else the unlisted families' when
// set; ok is false for a family neither covers.
func (t *Table) Policy(fam string) (p strategy.Policy, ok bool) {
	if p, ok = t.Schema[fam]; ok || t.Unlisted == nil {
		return p, ok
	}
	return *t.Unlisted, true
}

// Refusal is one refused mutation (or request): its registry row, the
// cause (wrapping Reason.Err) and where.
type Refusal struct {
	Reason *Reason
	Err    error
	// Index is the refused mutation's index in the input, -1 for a
	// refusal of the whole request.
	Index  int
	Family string
	// Named: the refusal is about an operation on Family, even "".
	Named     bool
	Column    []byte
	Timestamp bigtable.Timestamp // the caller's timestamp, when it gave one
	TTL       time.Duration      // the cell's TTL intent
	Seq       int64              // the cell's sequence intent
}

func (r *Refusal) Error() string { return r.Err.Error() }
func (r *Refusal) Unwrap() error { return r.Err }

// Refuse is a refusal of the whole request with err.
func Refuse(err error) *Refusal { return &Refusal{Reason: reasonOf(err), Err: err, Index: -1} }

func reasonOf(err error) *Reason {
	if r := Of(err); r != nil {
		return r
	}
	return &Reason{Err: err, Info: "other", Metric: "other", Rule: "invalid-request", Anchor: "guardrails"}
}

func (t *Table) refuse(i int, m *btpb.Mutation, in Intent, err error) *Refusal {
	c := cellOf(m, in)
	return t.refuseCell(i, &c, err)
}

// refuseCell is the refusal of c, the input's mutation i, with err.
func (t *Table) refuseCell(i int, c *cell, err error) *Refusal {
	col := c.qual
	if col == nil && c.qualS != "" {
		col = []byte(c.qualS) // a refusal's own copy: an Op's string is not the caller's bytes
	}
	r := &Refusal{Reason: reasonOf(err), Err: err, Index: i, Family: c.family, Named: c.kind != OpDeleteRow, Column: col, Timestamp: c.ts}
	switch c.intent.Kind {
	case IntentTTL:
		r.TTL = c.intent.TTL
	case IntentSequence:
		r.Seq = c.intent.Seq
	}
	return r
}

// opUnknown is a proto mutation of a kind newer than bttl's protos: it
// arrives with no oneof set, and what it writes is unknown.
const opUnknown OpKind = 255

// cell is one mutation as the write rules read it, from a proto (cellOf)
// or from a ttlclient change (Op.cell): Table.check decides on it, so
// both paths run the one rule.
type cell struct {
	kind   OpKind // a proto DeleteFromColumn is OpDeleteRange, its range 0 when unset
	family string
	// The qualifier: a proto's bytes, else an Op's string.
	qual     []byte
	qualS    string
	ts       bigtable.Timestamp // a SetCell's, an aggregate's, a range's start
	end      int64              // a range's end
	valueLen int                // a SetCell's value
	autoTS   bool               // TimestampOrigin CLIENT_AUTO_GENERATED
	intent   Intent
}

// cellOf is m, whose intent is in, as the rules read it.
func cellOf(m *btpb.Mutation, in Intent) cell {
	c := cell{kind: opUnknown, intent: in, autoTS: m.GetTimestampOrigin() == btpb.Mutation_CLIENT_AUTO_GENERATED}
	switch x := m.GetMutation().(type) {
	case *btpb.Mutation_SetCell_:
		s := x.SetCell
		c.kind, c.family, c.qual, c.ts, c.valueLen = OpSet, s.GetFamilyName(), s.GetColumnQualifier(), bigtable.Timestamp(s.GetTimestampMicros()), len(s.GetValue())
	case *btpb.Mutation_DeleteFromColumn_:
		d := x.DeleteFromColumn
		r := d.GetTimeRange()
		c.kind, c.family, c.qual, c.ts, c.end = OpDeleteRange, d.GetFamilyName(), d.GetColumnQualifier(), bigtable.Timestamp(r.GetStartTimestampMicros()), r.GetEndTimestampMicros()
	case *btpb.Mutation_DeleteFromFamily_:
		c.kind, c.family = OpDeleteFamily, x.DeleteFromFamily.GetFamilyName()
	case *btpb.Mutation_DeleteFromRow_:
		c.kind = OpDeleteRow
	case *btpb.Mutation_AddToCell_:
		a := x.AddToCell
		c.kind, c.family, c.qual, c.ts = OpAddInt, a.GetFamilyName(), a.GetColumnQualifier().GetRawValue(), bigtable.Timestamp(a.GetTimestamp().GetRawTimestampMicros())
	case *btpb.Mutation_MergeToCell_:
		a := x.MergeToCell
		c.kind, c.family, c.qual, c.ts = OpMergeBytes, a.GetFamilyName(), a.GetColumnQualifier().GetRawValue(), bigtable.Timestamp(a.GetTimestamp().GetRawTimestampMicros())
	}
	return c
}

// cell is o as the rules read it: what Protos would build for it, read
// by cellOf, without building it.
func (o *Op) cell() cell {
	c := cell{kind: o.Kind, family: o.Family, qualS: o.Column, ts: o.TS}
	switch o.Kind {
	case OpSet:
		c.valueLen, c.intent = len(o.Value), o.CellIntent()
	case OpDeleteColumn:
		c.kind, c.ts = OpDeleteRange, 0 // a whole column: no range
	case OpDeleteRange:
		c.end = o.Arg
	case OpDeleteFamily:
		c.qualS, c.ts = "", 0
	case OpDeleteRow:
		c.family, c.qualS, c.ts = "", "", 0
	}
	return c
}

func (c *cell) qualifierHasPrefix(prefix string) bool {
	if c.qual != nil {
		return strings.HasPrefix(string(c.qual), prefix)
	}
	return strings.HasPrefix(c.qualS, prefix)
}

// Mutations applies the rules to one row's mutations at now: Stamp, then
// Complete. The result is ms itself when nothing changes; the protos of
// ms are never written.
func (t *Table) Mutations(now time.Time, ms []*btpb.Mutation, in []Intent) ([]*btpb.Mutation, *Refusal) {
	out, r := t.Stamp(now, ms, in)
	if r != nil {
		return nil, r
	}
	return t.Complete(now, out)
}

// Stamp checks every mutation and gives each SetCell of a managed family
// the timestamp its family's strategy assigns (in[i], when given, is the
// intent of ms[i]). The result has one mutation per input, in order (a
// changed SetCell is a new proto), ms itself when nothing changes.
// Conditional mutations stamp both branches before completing either, so
// the refusal is the same whichever branch holds the worse cell.
func (t *Table) Stamp(now time.Time, ms []*btpb.Mutation, in []Intent) ([]*btpb.Mutation, *Refusal) {
	return t.stamp(now, ms, in, false)
}

// StampOwned is Stamp for protos the caller built for this one request
// and owns (ttlclient's, converted from a Mutation per Apply): their
// timestamps are written in place, so the result is ms.
func (t *Table) StampOwned(now time.Time, ms []*btpb.Mutation, in []Intent) *Refusal {
	_, r := t.stamp(now, ms, in, true)
	return r
}

// StampOps is Stamp over a ttlclient Mutation's changes themselves, with
// no proto built: sent[i] (len(sent) >= len(ops)) gets the timestamp
// op i is sent with, its own TS for a change that is not a Set. It
// applies the same rule to each change as Stamp does to its proto
// (Table.check), and refuses a row over RequestLimit as Complete does.
// complete reports that Complete would add to the row (a SetCell of a
// SingleValue family, a cell of a write-time family): the caller then
// builds it with Protos, StampOwned and Complete instead. The result is
// the same refusal, or the same sent timestamps, as that path's.
func (t *Table) StampOps(now time.Time, ops []Op, sent []bigtable.Timestamp) (complete bool, r *Refusal) {
	st := stampState{now: now, nowMicros: bigtable.Timestamp(now.UnixMicro())}
	for i := range ops {
		c := ops[i].cell()
		ts, err := t.check(&st, &c)
		if err != nil {
			return false, t.refuseCell(i, &c, err)
		}
		sent[i] = ts
		complete = complete || (c.kind != OpDeleteRow && t.completes(c.kind, c.family))
	}
	if !complete && len(ops) > RequestLimit() {
		return false, tooMany(len(ops), len(ops))
	}
	return complete, nil
}

// stampState is what check keeps from one cell to the next of a row:
// the last family's policy (a row's cells are mostly of one family).
type stampState struct {
	now       time.Time
	nowMicros bigtable.Timestamp
	fam       string
	p         strategy.Policy
	found     bool
	chk       strategy.ExplicitCheck
}

func (t *Table) stamp(now time.Time, ms []*btpb.Mutation, in []Intent, inPlace bool) ([]*btpb.Mutation, *Refusal) {
	var out []*btpb.Mutation // a copy, once a cell changes
	st := stampState{now: now, nowMicros: bigtable.Timestamp(now.UnixMicro())}
	for i, m := range ms {
		var intent Intent
		if i < len(in) {
			intent = in[i]
		}
		c := cellOf(m, intent)
		sent, err := t.check(&st, &c)
		if err != nil {
			return nil, t.refuseCell(i, &c, err)
		}
		send := m
		if c.kind == OpSet && sent != c.ts {
			x := m.GetSetCell()
			if inPlace {
				x.TimestampMicros = int64(sent)
			} else {
				send = &btpb.Mutation{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
					FamilyName: x.GetFamilyName(), ColumnQualifier: x.GetColumnQualifier(), TimestampMicros: int64(sent), Value: x.GetValue(),
				}}}
			}
		}
		if send != m && out == nil {
			out = append(make([]*btpb.Mutation, 0, len(ms)), ms[:i]...)
		}
		if out != nil {
			out = append(out, send)
		}
	}
	if out == nil {
		return ms, nil
	}
	return out, nil
}

// check is the write rule for one cell, whichever path it came by (a
// proto, Stamp; a ttlclient change, StampOps): the timestamp to send (c's
// own for a change that is not a SetCell), or why it is refused.
func (t *Table) check(st *stampState, c *cell) (bigtable.Timestamp, error) {
	if c.kind == opUnknown {
		return 0, fmt.Errorf("%w: a mutation of a kind bttl does not know", ErrUnclassifiable)
	}
	if c.kind == OpDeleteRow {
		return c.ts, nil
	}
	f := c.family
	if c.kind == OpSet && t.Probe != "" && f == t.Probe {
		if _, named := t.Schema[f]; !named {
			// Before the unlisted families: the probe never passes.
			return 0, fmt.Errorf("%w: this guard is installed; nothing was sent", ErrVerifyProbe)
		}
	}
	if !st.found || f != st.fam {
		if st.p, st.found = t.Policy(f); !st.found {
			return 0, ErrUnknownFamily
		}
		st.fam = f
		st.chk = strategy.NewExplicitCheck(st.p, st.nowMicros)
	}
	p := &st.p
	if t.Mode == ModeClient && t.writeTime && p.HasWriteTime() && (c.kind == OpSet || c.kind == OpDeleteRange) {
		// bttl's client refuses a write to a write-time family's
		// reserved qualifiers in the mutation's order, with the cell's
		// other checks; the guard, in Complete, once every cell of
		// both branches has passed (docs/design.md#rules).
		if c.qualifierHasPrefix(strategy.ReservedQualifierStart) {
			if c.qualifierHasPrefix(strategy.WriteTimePrefix) {
				return 0, errCompanionSent
			}
			return 0, ErrReservedColumn
		}
	}
	switch c.kind {
	case OpSet:
		if t.Mode == ModeClient && c.valueLen > MaxValueBytes {
			return 0, fmt.Errorf("%w: %d bytes", ErrValueTooLarge, c.valueLen)
		}
		sent, err := t.timestamp(p, &st.chk, c.ts, c.intent, st.now)
		if err != nil {
			return 0, err
		}
		if !wholeMilli(int64(sent)) && sent != bigtable.ServerTime && !c.autoTS {
			// Only the guard sends a caller's timestamp as it is (an
			// unmanaged family's); the server would refuse it, and a
			// MutateRows with it whole. A client-generated one the
			// server truncates itself (Mutation.TimestampOrigin).
			return 0, granularityError("SetCell timestamp", int64(sent))
		}
		return sent, nil
	case OpDeleteRange:
		start, end := int64(c.ts), c.end
		if t.Mode == ModeClient && (start < 0 || end < 0) {
			return 0, fmt.Errorf("%w: [%d, %d)", ErrInvalidTimestampRange, start, end)
		}
		// In both modes: the server refuses such a bound, and the
		// client's DeleteTimestampRange would truncate it, deleting
		// cells of a range the caller did not name.
		for _, b := range [2]int64{start, end} {
			if !wholeMilli(b) {
				return 0, granularityError(fmt.Sprintf("DeleteFromColumn range [%d, %d) bound", start, end), b)
			}
		}
		if t.Mode == ModeClient && end != 0 && end <= start {
			return 0, fmt.Errorf("%w: [%d, %d)", ErrInvalidTimestampRange, start, end)
		}
	case OpAddInt, OpMergeBytes:
		op := "AddToCell"
		if c.kind == OpMergeBytes {
			op = "MergeToCell"
		}
		if p.Managed() {
			return 0, fmt.Errorf("%w: %s on a %s family: the server would pick the timestamp", ErrServerAssignedTimestamp, op, p.Kind())
		}
		if t.Mode == ModeClient && c.ts < 0 {
			return 0, fmt.Errorf("%w: timestamp %d", strategy.ErrBeforeEpoch, c.ts)
		}
		if t.Mode == ModeGuard && !wholeMilli(int64(c.ts)) && !c.autoTS {
			// The guard sends it as it is, and an aggregate's timestamp
			// "must be a raw_timestamp_micros that matches the table's
			// granularity" (Mutation.AddToCell.timestamp). bttl's
			// client sends it through the Go client's AddIntToCell and
			// MergeBytesToCell, which truncate it, as Set does.
			return 0, granularityError(op+" timestamp", int64(c.ts))
		}
	}
	return c.ts, nil
}

// wholeMilli reports whether ts is a multiple of 1000 microseconds, the
// only timestamps a table of millisecond granularity takes ("Timestamps
// not matching the granularity will be rejected", Table.granularity,
// google/bigtable/admin/v2/table.proto).
func wholeMilli(ts int64) bool { return ts%1000 == 0 }

func granularityError(what string, ts int64) error {
	return fmt.Errorf("%w: %s %d is not a multiple of 1000 microseconds; Bigtable would refuse it (InvalidArgument)", ErrTimestampGranularity, what, ts)
}

// CheckFilter refuses a caller's filter holding a timestamp range bound
// that is not a whole millisecond, in a chain, an interleave or a
// condition at any depth: the server would refuse the read (or the
// CheckAndMutateRow whose predicate it is).
func CheckFilter(f *btpb.RowFilter) *Refusal {
	if err := filterGranularity(f); err != nil {
		return Refuse(err)
	}
	return nil
}

func filterGranularity(f *btpb.RowFilter) error {
	switch x := f.GetFilter().(type) {
	case *btpb.RowFilter_TimestampRangeFilter:
		r := x.TimestampRangeFilter
		for _, b := range [2]int64{r.GetStartTimestampMicros(), r.GetEndTimestampMicros()} {
			if !wholeMilli(b) {
				return granularityError(fmt.Sprintf("TimestampRangeFilter [%d, %d) bound", r.GetStartTimestampMicros(), r.GetEndTimestampMicros()), b)
			}
		}
	case *btpb.RowFilter_Chain_:
		for _, sub := range x.Chain.GetFilters() {
			if err := filterGranularity(sub); err != nil {
				return err
			}
		}
	case *btpb.RowFilter_Interleave_:
		for _, sub := range x.Interleave.GetFilters() {
			if err := filterGranularity(sub); err != nil {
				return err
			}
		}
	case *btpb.RowFilter_Condition_:
		c := x.Condition
		for _, sub := range [3]*btpb.RowFilter{c.GetPredicateFilter(), c.GetTrueFilter(), c.GetFalseFilter()} {
			if err := filterGranularity(sub); err != nil {
				return err
			}
		}
	}
	return nil
}

// timestamp is the timestamp to send for a cell of policy p whose proto
// holds ts and whose intent is in.
func (t *Table) timestamp(p *strategy.Policy, chk *strategy.ExplicitCheck, ts bigtable.Timestamp, in Intent, now time.Time) (bigtable.Timestamp, error) {
	if !p.Managed() {
		switch {
		case in.Kind != IntentNone:
			return 0, fmt.Errorf("%w: an unmanaged family keeps the caller's timestamp", strategy.ErrWrongCellOption)
		case t.Mode == ModeGuard || ts == bigtable.ServerTime:
			return ts, nil
		case ts < 0:
			return 0, fmt.Errorf("%w: timestamp %d", strategy.ErrBeforeEpoch, ts)
		}
		return strategy.Millis(ts), nil
	}
	switch in.Kind {
	case IntentTTL:
		return p.WriteTimestamp(now, in.TTL) // a TTL over a clamping cap is clamped
	case IntentSequence:
		return p.SequenceTimestamp(in.Seq)
	}
	if ts == bigtable.ServerTime {
		if t.Mode == ModeGuard {
			return 0, fmt.Errorf("%w: a %s family", strategy.ErrServerTimestamp, p.Kind())
		}
		return p.DefaultTimestamp(now)
	}
	sent, err := chk.Check(ts)
	if err != nil {
		if !errors.Is(err, strategy.ErrAlreadyExpired) { // that message gives now itself
			err = fmt.Errorf("%w (now %d)", err, now.UnixMicro())
		}
		return 0, err
	}
	if p.Kind() != strategy.KindSequence && sent != strategy.Millis(ts) {
		// A family that clamps TTLs lowered this one: an explicit
		// timestamp is the caller's statement of the expiry, so it is
		// refused rather than rewritten (docs/design.md#ttl-cap).
		return 0, fmt.Errorf("%w: timestamp %d is over the family's max TTL %s (an explicit timestamp is not clamped)",
			strategy.ErrTTLTooLong, ts, p.MaxTTL())
	}
	return sent, nil
}

// Complete adds to a row's stamped mutations what the families' rules
// add: the delete of the whole column before each SetCell of a
// strategy.SingleValue family (docs/design.md#collisions), and the
// write-time companions of a family with strategy.WithWriteTime
// (docs/design.md#write-time), refusing any write to a write-time
// family's reserved qualifiers. ms is returned when nothing is added.
//
// A row over MaxRequestMutations once completed is refused
// (ErrTooManyMutations): the server would refuse the request carrying it
// (and, in a MutateRows request, every other row with it).
func (t *Table) Complete(now time.Time, ms []*btpb.Mutation) ([]*btpb.Mutation, *Refusal) {
	written := len(ms)
	if t.singleValue {
		ms = t.addSingleValueDeletes(ms)
	}
	if t.writeTime {
		var r *Refusal
		if ms, r = t.addCompanions(bigtable.Timestamp(now.UnixMicro()), ms); r != nil {
			return nil, r
		}
	}
	if len(ms) > RequestLimit() {
		return nil, tooMany(len(ms), written)
	}
	return ms, nil
}

// tooMany is the refusal of a row of n mutations once completed, written
// of them the caller's.
func tooMany(n, written int) *Refusal {
	return Refuse(fmt.Errorf("%w: %d mutations, %d of them the families' single-value deletes and write-time companions; nothing of the row was sent",
		ErrTooManyMutations, n, n-written))
}

// completes reports whether Complete may add to a row for a change of
// kind to family: a SetCell of a SingleValue family (its column's
// delete), a cell or column delete of a write-time family (its
// companion's).
func (t *Table) completes(kind OpKind, family string) bool {
	switch kind {
	case OpSet:
		return t.singleValueDeletes(family) || t.companions(family)
	case OpDeleteColumn, OpDeleteRange:
		return t.companions(family)
	}
	return false
}

// singleValueDeletes reports whether a SetCell of family gets the delete
// of its column before it (addSingleValueDeletes).
func (t *Table) singleValueDeletes(family string) bool {
	return t.singleValue && t.Schema[family].IsSingleValue()
}

// companions reports whether a change to a column of family gets its
// write-time companion's change beside it (addCompanions).
func (t *Table) companions(family string) bool {
	return t.writeTime && t.Schema[family].HasWriteTime()
}

// MaxRequestMutations is the most mutations Bigtable takes for one row in
// one request: "at most 100000" (google.bigtable.v2.MutateRowRequest.mutations,
// CheckAndMutateRowRequest's true_mutations and false_mutations each), and
// in total over a MutateRowsRequest's entries; the client's own grouping
// bound (maxMutations, v1.58.0).
const MaxRequestMutations = 100000

// requestLimit is a lower limit a test put in place of
// MaxRequestMutations (0: none).
var requestLimit atomic.Int64

// RequestLimit is the most mutations bttl sends in one request (and one
// row): MaxRequestMutations, unless a test lowered it.
func RequestLimit() int {
	if n := requestLimit.Load(); n > 0 {
		return int(n)
	}
	return MaxRequestMutations
}

// SetRequestLimitForTest lowers RequestLimit to n (at most
// MaxRequestMutations) until restore is called, so a test exercises the
// limit (the rules' refusal, the wire guard's split) with small requests
// rather than 100,000 mutations; with prodserver.Config.MaxMutations the
// server's limit is the same. It changes the whole process: a test that
// calls it must not run in parallel with another.
func SetRequestLimitForTest(n int) (restore func()) {
	if n <= 0 || n > MaxRequestMutations {
		n = MaxRequestMutations
	}
	old := requestLimit.Swap(int64(n))
	return func() { requestLimit.Store(old) }
}

// addSingleValueDeletes puts a delete of the whole column before each
// SetCell of a SingleValue family, unless the mutation before it is
// already that delete. The rewrite is the same on every attempt.
func (t *Table) addSingleValueDeletes(ms []*btpb.Mutation) []*btpb.Mutation {
	var out []*btpb.Mutation
	for i, m := range ms {
		s := m.GetSetCell()
		if s != nil && t.singleValueDeletes(s.GetFamilyName()) && !(i > 0 && deletesColumn(ms[i-1], s)) {
			if out == nil {
				out = append(make([]*btpb.Mutation, 0, len(ms)+1), ms[:i]...)
			}
			out = append(out, &btpb.Mutation{Mutation: &btpb.Mutation_DeleteFromColumn_{DeleteFromColumn: &btpb.Mutation_DeleteFromColumn{
				FamilyName: s.GetFamilyName(), ColumnQualifier: s.GetColumnQualifier(),
			}}})
		}
		if out != nil {
			out = append(out, m)
		}
	}
	if out == nil {
		return ms
	}
	return out
}

func deletesColumn(m *btpb.Mutation, s *btpb.Mutation_SetCell) bool {
	d := m.GetDeleteFromColumn()
	r := d.GetTimeRange()
	return d != nil && d.GetFamilyName() == s.GetFamilyName() && string(d.GetColumnQualifier()) == string(s.GetColumnQualifier()) &&
		r.GetStartTimestampMicros() == 0 && r.GetEndTimestampMicros() == 0
}

var errCompanionSent = fmt.Errorf("%w: the request writes a write-time companion; bttl writes and deletes every companion itself "+
	"(with its own clock) and stores none it did not compute: send the cell's change alone", ErrReservedColumn)

// addCompanions: right after every SetCell of a write-time family a
// companion at the same timestamp holding the write time (now), right
// after every column delete the same delete of its companion, so the
// companions change exactly as their cells do. Any write to the reserved
// qualifiers is refused, whatever it holds.
func (t *Table) addCompanions(now bigtable.Timestamp, ms []*btpb.Mutation) ([]*btpb.Mutation, *Refusal) {
	var out []*btpb.Mutation
	var wt []byte
	for i, m := range ms {
		var fam string
		var col []byte
		var set, column bool
		var start, end int64
		switch x := m.GetMutation().(type) {
		case *btpb.Mutation_SetCell_:
			fam, col, set, column = x.SetCell.GetFamilyName(), x.SetCell.GetColumnQualifier(), true, true
			start = int64(strategy.Millis(bigtable.Timestamp(x.SetCell.GetTimestampMicros())))
		case *btpb.Mutation_DeleteFromColumn_:
			fam, col, column = x.DeleteFromColumn.GetFamilyName(), x.DeleteFromColumn.GetColumnQualifier(), true
			r := x.DeleteFromColumn.GetTimeRange()
			start, end = r.GetStartTimestampMicros(), r.GetEndTimestampMicros()
		}
		if !column || !t.companions(fam) {
			if out != nil {
				out = append(out, m)
			}
			continue
		}
		if strings.HasPrefix(string(col), strategy.ReservedQualifierStart) {
			err := ErrReservedColumn
			if strings.HasPrefix(string(col), strategy.WriteTimePrefix) {
				err = errCompanionSent
			}
			return nil, t.refuse(i, m, Intent{}, err)
		}
		if out == nil {
			out = append(make([]*btpb.Mutation, 0, 2*len(ms)), ms[:i]...)
			wt = strategy.WriteTimeValue(now)
		}
		q := []byte(strategy.WriteTimeColumn(string(col)))
		if set {
			out = append(out, m, &btpb.Mutation{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
				FamilyName: fam, ColumnQualifier: q, TimestampMicros: start, Value: wt,
			}}})
			continue
		}
		out = append(out, m, &btpb.Mutation{Mutation: &btpb.Mutation_DeleteFromColumn_{DeleteFromColumn: &btpb.Mutation_DeleteFromColumn{
			FamilyName: fam, ColumnQualifier: q, TimeRange: &btpb.TimestampRange{StartTimestampMicros: start, EndTimestampMicros: end},
		}}})
	}
	if out == nil {
		return ms, nil
	}
	return out, nil
}

// ReadModifyWrite refuses a rule on a managed family (the server picks
// the timestamp) or on a family the table does not cover.
func (t *Table) ReadModifyWrite(rs []*btpb.ReadModifyWriteRule) *Refusal {
	for i, r := range rs {
		p, ok := t.Policy(r.GetFamilyName())
		var err error
		switch {
		case !ok:
			err = ErrUnknownFamily
		case p.Managed():
			err = fmt.Errorf("%w: ReadModifyWrite on a %s family: the server would pick the timestamp", ErrServerAssignedTimestamp, p.Kind())
		default:
			continue
		}
		return &Refusal{Reason: reasonOf(err), Err: err, Index: i, Family: r.GetFamilyName(), Named: true, Column: r.GetColumnQualifier()}
	}
	return nil
}

// Filter is the filter to send in place of a caller's (nil: none): the
// TTL filter at now chained before it, or caller itself when the table
// has no managed family.
func (t *Table) Filter(now time.Time, caller *btpb.RowFilter) *btpb.RowFilter {
	if !t.filters.Managed() {
		return caller
	}
	return filters.ChainProto(t.ttlProto(bigtable.Timestamp(now.UnixMicro())), caller)
}

// ttlProto is the TTL filter at now, built once per millisecond (once for
// good when no family expires by age).
func (t *Table) ttlProto(now bigtable.Timestamp) *btpb.RowFilter {
	milli := int64(strategy.Millis(now)) / 1000
	if c := t.ttl.Load(); c != nil && (c.milli == milli || !t.hasAge) {
		return c.f
	}
	f := t.filters.TTLProto(now)
	t.ttl.Store(&cachedTTL{milli: milli, f: f})
	return f
}

// Same reports whether a and b are the same slice (the rules return their
// input when they change nothing).
func Same(a, b []*btpb.Mutation) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// ShallowCopy returns a new message with m's fields; message-typed fields
// (row sets, mutations) are shared, not copied.
func ShallowCopy[M proto.Message](m M) M {
	src := m.ProtoReflect()
	dst := src.New()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		dst.Set(fd, v)
		return true
	})
	if u := src.GetUnknown(); len(u) > 0 {
		dst.SetUnknown(u)
	}
	return dst.Interface().(M)
}

// The changes of a ttlclient.Mutation, as the methods that record them
// say, and their protos: what a Mutation sends is built here, once.

// OpKind is the kind of one change of a ttlclient.Mutation.
type OpKind uint8

const (
	OpSet OpKind = iota
	OpDeleteColumn
	OpDeleteRange
	OpDeleteFamily
	OpDeleteRow
	OpAddInt
	OpMergeBytes
)

// Op is one change of a ttlclient.Mutation, as its method recorded it:
// 80 bytes, a Mutation's whole storage per change, so the fields no change
// uses together share Arg.
type Op struct {
	Family, Column string
	Value          []byte
	TS             bigtable.Timestamp // Set's, an aggregate's, a range's start
	// Arg is the change's other number: a range's end (OpDeleteRange),
	// AddIntToCell's value (OpAddInt), the cell's TTL in nanoseconds
	// (IntentTTL) or its sequence number (IntentSequence).
	Arg    int64
	Kind   OpKind
	Intent IntentKind // SetTTL's or SetVersion's
}

// CellIntent is o's intent, as the rules read it.
func (o *Op) CellIntent() Intent {
	switch o.Intent {
	case IntentTTL:
		return Intent{Kind: IntentTTL, TTL: time.Duration(o.Arg)}
	case IntentSequence:
		return Intent{Kind: IntentSequence, Seq: o.Arg}
	}
	return Intent{}
}

// OpProtos is a Mutation's changes as the data API's protos (the protos
// the client's own methods build), with each cell's intent beside it: what
// the rules read. They are scratch for one build: stamped in place
// (StampOwned), read while the bigtable.Mutation to send is built from
// them (SendOps, ToBigtable, which copy what they keep), then handed back
// with Release for the next build to reuse, so that the rules' pass over a
// row allocates nothing once warm. Nothing may refer to them after
// Release: a Refusal's Column, for one, is copied before (ttlclient's
// CellError holds it as a string).
type OpProtos struct {
	Mutations []*btpb.Mutation
	Intents   []Intent // nil when no change has one

	recs    []opRecord
	cols    []byte
	intents []Intent
}

// opRecord holds one change's proto and, for a Set, its cell: one
// allocation for all the changes of a row.
type opRecord struct {
	pb   btpb.Mutation
	set  btpb.Mutation_SetCell_
	cell btpb.Mutation_SetCell
}

var opProtosPool = sync.Pool{New: func() any { return new(OpProtos) }}

// maxPooledOps bounds the scratch the pool keeps: a rare huge row's is
// left to the collector rather than held for the next small one.
const maxPooledOps = 1024

// Protos is ops as protos, in scratch from a pool: call Release once
// nothing refers to them.
func Protos(ops []Op) *OpProtos {
	p := opProtosPool.Get().(*OpProtos)
	nCol := 0
	for i := range ops {
		nCol += len(ops[i].Column)
	}
	if cap(p.recs) < len(ops) {
		p.recs = make([]opRecord, len(ops))
		p.Mutations = make([]*btpb.Mutation, len(ops))
	}
	recs, out := p.recs[:len(ops)], p.Mutations[:len(ops)]
	if cap(p.cols) < nCol {
		p.cols = make([]byte, nCol)
	}
	cols := p.cols[:nCol]
	col := func(c string) []byte {
		q := cols[:len(c):len(c)]
		copy(q, c)
		cols = cols[len(c):]
		return q
	}
	p.Intents = nil
	for i := range ops {
		o := &ops[i]
		pb := &recs[i].pb
		switch o.Kind {
		case OpSet:
			cell, set := &recs[i].cell, &recs[i].set
			cell.FamilyName, cell.ColumnQualifier, cell.TimestampMicros, cell.Value = o.Family, col(o.Column), int64(o.TS), o.Value
			set.SetCell = cell
			pb.Mutation = set
			if o.Intent != IntentNone {
				if p.Intents == nil {
					if cap(p.intents) < len(ops) {
						p.intents = make([]Intent, len(ops))
					}
					p.Intents = p.intents[:len(ops)]
					clear(p.Intents)
				}
				p.Intents[i] = o.CellIntent()
			}
		case OpDeleteColumn:
			pb.Mutation = &btpb.Mutation_DeleteFromColumn_{DeleteFromColumn: &btpb.Mutation_DeleteFromColumn{
				FamilyName: o.Family, ColumnQualifier: col(o.Column)}}
		case OpDeleteRange:
			pb.Mutation = &btpb.Mutation_DeleteFromColumn_{DeleteFromColumn: &btpb.Mutation_DeleteFromColumn{
				FamilyName: o.Family, ColumnQualifier: col(o.Column),
				TimeRange: &btpb.TimestampRange{StartTimestampMicros: int64(o.TS), EndTimestampMicros: o.Arg}}}
		case OpDeleteFamily:
			pb.Mutation = &btpb.Mutation_DeleteFromFamily_{DeleteFromFamily: &btpb.Mutation_DeleteFromFamily{FamilyName: o.Family}}
		case OpDeleteRow:
			pb.Mutation = &btpb.Mutation_DeleteFromRow_{DeleteFromRow: &btpb.Mutation_DeleteFromRow{}}
		case OpAddInt:
			pb.Mutation = &btpb.Mutation_AddToCell_{AddToCell: &btpb.Mutation_AddToCell{
				FamilyName:      o.Family,
				ColumnQualifier: &btpb.Value{Kind: &btpb.Value_RawValue{RawValue: col(o.Column)}},
				Timestamp:       &btpb.Value{Kind: &btpb.Value_RawTimestampMicros{RawTimestampMicros: int64(o.TS)}},
				Input:           &btpb.Value{Kind: &btpb.Value_IntValue{IntValue: o.Arg}},
			}}
		case OpMergeBytes:
			pb.Mutation = &btpb.Mutation_MergeToCell_{MergeToCell: &btpb.Mutation_MergeToCell{
				FamilyName:      o.Family,
				ColumnQualifier: &btpb.Value{Kind: &btpb.Value_RawValue{RawValue: col(o.Column)}},
				Timestamp:       &btpb.Value{Kind: &btpb.Value_RawTimestampMicros{RawTimestampMicros: int64(o.TS)}},
				Input:           &btpb.Value{Kind: &btpb.Value_RawValue{RawValue: o.Value}},
			}}
		}
		out[i] = pb
	}
	p.Mutations = out
	return p
}

// Release hands p back to the pool. Its protos are not cleared (the next
// build writes every field it reads): a released row's values stay
// reachable from the pool until the next build takes it or the collector
// empties the pool, as a Mutation's own values do while it is kept.
func (p *OpProtos) Release() {
	if cap(p.recs) > maxPooledOps {
		return
	}
	p.Intents = nil
	opProtosPool.Put(p)
}

// SendOps is the bigtable.Mutation for ops, op i sent with timestamp
// sent[i] (StampOps), built with the client's own methods from the ops'
// values: one call per change, as a caller of the client would make.
func SendOps(ops []Op, sent []bigtable.Timestamp) *bigtable.Mutation {
	b := bigtable.NewMutation()
	for i := range ops {
		o := &ops[i]
		switch o.Kind {
		case OpSet:
			b.Set(o.Family, o.Column, sent[i], o.Value)
		case OpDeleteColumn:
			b.DeleteCellsInColumn(o.Family, o.Column)
		case OpDeleteRange:
			b.DeleteTimestampRange(o.Family, o.Column, o.TS, bigtable.Timestamp(o.Arg))
		case OpDeleteFamily:
			b.DeleteCellsInFamily(o.Family)
		case OpDeleteRow:
			b.DeleteRow()
		case OpAddInt:
			b.AddIntToCell(o.Family, o.Column, o.TS, o.Arg)
		case OpMergeBytes:
			b.MergeBytesToCell(o.Family, o.Column, o.TS, o.Value)
		}
	}
	return b
}

// ToBigtable is the bigtable.Mutation holding ms, built with the client's
// own methods (its protos are the ones those methods build, so what is
// sent is ms).
func ToBigtable(ms []*btpb.Mutation) *bigtable.Mutation {
	b := bigtable.NewMutation()
	for _, pb := range ms {
		switch x := pb.GetMutation().(type) {
		case *btpb.Mutation_SetCell_:
			c := x.SetCell
			b.Set(c.GetFamilyName(), string(c.GetColumnQualifier()), bigtable.Timestamp(c.GetTimestampMicros()), c.GetValue())
		case *btpb.Mutation_DeleteFromColumn_:
			d := x.DeleteFromColumn
			if r := d.GetTimeRange(); r != nil {
				b.DeleteTimestampRange(d.GetFamilyName(), string(d.GetColumnQualifier()),
					bigtable.Timestamp(r.GetStartTimestampMicros()), bigtable.Timestamp(r.GetEndTimestampMicros()))
			} else {
				b.DeleteCellsInColumn(d.GetFamilyName(), string(d.GetColumnQualifier()))
			}
		case *btpb.Mutation_DeleteFromFamily_:
			b.DeleteCellsInFamily(x.DeleteFromFamily.GetFamilyName())
		case *btpb.Mutation_DeleteFromRow_:
			b.DeleteRow()
		case *btpb.Mutation_AddToCell_:
			a := x.AddToCell
			b.AddIntToCell(a.GetFamilyName(), string(a.GetColumnQualifier().GetRawValue()),
				bigtable.Timestamp(a.GetTimestamp().GetRawTimestampMicros()), a.GetInput().GetIntValue())
		case *btpb.Mutation_MergeToCell_:
			a := x.MergeToCell
			b.MergeBytesToCell(a.GetFamilyName(), string(a.GetColumnQualifier().GetRawValue()),
				bigtable.Timestamp(a.GetTimestamp().GetRawTimestampMicros()), a.GetInput().GetRawValue())
		}
	}
	return b
}

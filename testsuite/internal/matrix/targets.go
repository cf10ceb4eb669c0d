package matrix

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/testsuite/internal/model"
	"github.com/bttl/bttl/ttlclient"
	"github.com/bttl/bttl/wireguard"
)

// Target is one client path under test: it writes the model's operations
// the way its path expresses them and reads with the caller's filter.
type Target interface {
	// Apply writes ops to row as one mutation.
	Apply(ctx context.Context, row string, ops []model.Op) error
	// ApplyBulk writes ops[i] to rows[i].
	ApplyBulk(ctx context.Context, rows []string, ops [][]model.Op) ([]error, error)
	// CondApply writes tops to row if cond (nil: any cell) matches a live
	// cell of row, else fops; either may be nil.
	CondApply(ctx context.Context, row string, cond bigtable.Filter, tops, fops []model.Op) error
	// ReadRow and ReadRows read with the caller's filter f (nil: none).
	ReadRow(ctx context.Context, row string, f bigtable.Filter) (bigtable.Row, error)
	ReadRows(ctx context.Context, rs bigtable.RowSet, f bigtable.Filter, fn func(bigtable.Row) bool) error
}

// Expirer is a Target with the lifecycle operations; the suite runs its
// Expire steps only on one (the ttlclient.Table paths are).
type Expirer interface {
	Expire(ctx context.Context, row, family, column string, ttl time.Duration, opts ...ttlclient.ExpireOption) (bool, error)
	ExpireColumn(ctx context.Context, row, family, column string, ttl time.Duration, opts ...ttlclient.ExpireColumnOption) (int, error)
	ExpireColumnAt(ctx context.Context, row, family, column string, at time.Time, opts ...ttlclient.ExpireColumnOption) (int, error)
	ExpireRow(ctx context.Context, row string, ttl time.Duration, opts ...ttlclient.ExpireColumnOption) (int, error)
	ExpireRowAt(ctx context.Context, row string, at time.Time, opts ...ttlclient.ExpireColumnOption) (int, error)
	ReadRowAndExpireAt(ctx context.Context, row string, filter bigtable.Filter, at time.Time) (bigtable.Row, ttlclient.ExpireResult, error)
	ExpireAt(ctx context.Context, row, family, column string, at time.Time, opts ...ttlclient.ExpireOption) (ttlclient.ExpireResult, error)
	Persist(ctx context.Context, row, family, column string, opts ...ttlclient.ExpireOption) (ttlclient.ExpireResult, error)
	SetKeepTTL(ctx context.Context, row, family, column string, value []byte) (ttlclient.ExpireResult, error)
	SetColumns(ctx context.Context, row, family string, values map[string][]byte, ttl time.Duration, cond ttlclient.SetCondition) (bool, error)
	SetColumnsKeepTTL(ctx context.Context, row, family string, values map[string][]byte) (ttlclient.ExpireResult, error)
	MaxWriteTime(ctx context.Context, row, family string, columns ...string) (time.Time, error)
	ReadRowAndExpire(ctx context.Context, row string, filter bigtable.Filter, ttl time.Duration) (bigtable.Row, ttlclient.ExpireResult, error)
	ReadRowAndPersist(ctx context.Context, row string, filter bigtable.Filter) (bigtable.Row, ttlclient.ExpireResult, error)
	WriteTime(ctx context.Context, item bigtable.ReadItem) (time.Time, error)
}

// Lowerer is a Target whose path cannot express some operations: Lower
// rewrites a drawn mutation at clock reading now into what the path sends,
// before the model checks it (a plain client has no TTL option: it
// computes the timestamp itself).
type Lowerer interface {
	Lower(ops []model.Op, now time.Time) []model.Op
}

// Classify is the refusal class of a write's error: a *ttlclient.CellError
// by the strategy sentinel it wraps, a wire guard refusal
// (FailedPrecondition) by the rule its message names. ok is false for an
// error that is neither.
func Classify(err error) (model.Class, bool) {
	var ce *ttlclient.CellError
	if errors.As(err, &ce) {
		for _, c := range []struct {
			sentinel error
			class    model.Class
		}{
			{strategy.ErrInvalidTTL, model.ClassInvalidTTL},
			{strategy.ErrTTLTooLong, model.ClassTTLTooLong},
			{strategy.ErrTimestampOverflow, model.ClassOverflow},
			{strategy.ErrBeforeEpoch, model.ClassBeforeEpoch},
			{strategy.ErrInvalidSequence, model.ClassInvalidSequence},
			{strategy.ErrServerTimestamp, model.ClassServerTimestamp},
			{strategy.ErrAlreadyExpired, model.ClassExpired},
			{strategy.ErrWrongCellOption, model.ClassWrongOption},
			{ttlclient.ErrUnknownFamily, model.ClassUnknownFamily},
			{ttlclient.ErrCannotPersist, model.ClassCannotPersist},
			{ttlclient.ErrNotApplicable, model.ClassNotApplicable},
			{ttlclient.ErrReservedColumn, model.ClassReservedColumn},
		} {
			if errors.Is(err, c.sentinel) {
				return c.class, true
			}
		}
		return model.ClassInvalid, true
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return "", false
	}
	// bigtable v1.58.0 rebuilds the status without its details: the rule
	// is in the message, "rule <name>:".
	_, rest, ok := strings.Cut(st.Message(), "rule ")
	if !ok {
		return "", false
	}
	rule, _, _ := strings.Cut(rest, ":")
	switch rule {
	case wireguard.RuleServerTimestamp:
		return model.ClassServerTimestamp, true
	case wireguard.RuleExpiredOnArrival:
		return model.ClassExpired, true
	case wireguard.RuleBeforeEpoch:
		return model.ClassBeforeEpoch, true
	case wireguard.RuleInvalidSequence:
		return model.ClassInvalidSequence, true
	case wireguard.RuleTTLTooLong:
		return model.ClassTTLTooLong, true
	case wireguard.RuleUnknownFamily:
		return model.ClassUnknownFamily, true
	case wireguard.RuleReservedColumn:
		return model.ClassReservedColumn, true
	}
	return "", false
}

// TableTarget is the library's own path: ttlclient.Table with Mutation.
func TableTarget(t *ttlclient.Table) Target { return tableTarget{t} }

type tableTarget struct{ t *ttlclient.Table }

func (a tableTarget) Apply(ctx context.Context, row string, ops []model.Op) error {
	return a.t.Apply(ctx, row, toMutation(ops))
}

func (a tableTarget) ApplyBulk(ctx context.Context, rows []string, ops [][]model.Op) ([]error, error) {
	muts := make([]*ttlclient.Mutation, len(ops))
	for i, o := range ops {
		muts[i] = toMutation(o)
	}
	return a.t.ApplyBulk(ctx, rows, muts)
}

func (a tableTarget) CondApply(ctx context.Context, row string, cond bigtable.Filter, tops, fops []model.Op) error {
	var mt, mf *ttlclient.Mutation
	if tops != nil {
		mt = toMutation(tops)
	}
	if fops != nil {
		mf = toMutation(fops)
	}
	return a.t.Apply(ctx, row, ttlclient.NewCondMutation(cond, mt, mf))
}

func (a tableTarget) Expire(ctx context.Context, row, family, column string, ttl time.Duration, opts ...ttlclient.ExpireOption) (bool, error) {
	return a.t.Expire(ctx, row, family, column, ttl, opts...)
}

func (a tableTarget) ExpireColumn(ctx context.Context, row, family, column string, ttl time.Duration, opts ...ttlclient.ExpireColumnOption) (int, error) {
	return a.t.ExpireColumn(ctx, row, family, column, ttl, opts...)
}

func (a tableTarget) ExpireColumnAt(ctx context.Context, row, family, column string, at time.Time, opts ...ttlclient.ExpireColumnOption) (int, error) {
	return a.t.ExpireColumnAt(ctx, row, family, column, at, opts...)
}

func (a tableTarget) ExpireRow(ctx context.Context, row string, ttl time.Duration, opts ...ttlclient.ExpireColumnOption) (int, error) {
	return a.t.ExpireRow(ctx, row, ttl, opts...)
}

func (a tableTarget) ExpireRowAt(ctx context.Context, row string, at time.Time, opts ...ttlclient.ExpireColumnOption) (int, error) {
	return a.t.ExpireRowAt(ctx, row, at, opts...)
}

func (a tableTarget) ReadRowAndExpireAt(ctx context.Context, row string, filter bigtable.Filter, at time.Time) (bigtable.Row, ttlclient.ExpireResult, error) {
	return a.t.ReadRowAndExpireAt(ctx, row, filter, at)
}

func (a tableTarget) SetColumns(ctx context.Context, row, family string, values map[string][]byte, ttl time.Duration, cond ttlclient.SetCondition) (bool, error) {
	return a.t.SetColumns(ctx, row, family, values, ttl, cond)
}

func (a tableTarget) SetColumnsKeepTTL(ctx context.Context, row, family string, values map[string][]byte) (ttlclient.ExpireResult, error) {
	return a.t.SetColumnsKeepTTL(ctx, row, family, values)
}

func (a tableTarget) ExpireAt(ctx context.Context, row, family, column string, at time.Time, opts ...ttlclient.ExpireOption) (ttlclient.ExpireResult, error) {
	return a.t.ExpireAt(ctx, row, family, column, at, opts...)
}

func (a tableTarget) Persist(ctx context.Context, row, family, column string, opts ...ttlclient.ExpireOption) (ttlclient.ExpireResult, error) {
	return a.t.Persist(ctx, row, family, column, opts...)
}

func (a tableTarget) SetKeepTTL(ctx context.Context, row, family, column string, value []byte) (ttlclient.ExpireResult, error) {
	return a.t.SetKeepTTL(ctx, row, family, column, value)
}

func (a tableTarget) ReadRowAndExpire(ctx context.Context, row string, filter bigtable.Filter, ttl time.Duration) (bigtable.Row, ttlclient.ExpireResult, error) {
	return a.t.ReadRowAndExpire(ctx, row, filter, ttl)
}

func (a tableTarget) ReadRowAndPersist(ctx context.Context, row string, filter bigtable.Filter) (bigtable.Row, ttlclient.ExpireResult, error) {
	return a.t.ReadRowAndPersist(ctx, row, filter)
}

func (a tableTarget) MaxWriteTime(ctx context.Context, row, family string, columns ...string) (time.Time, error) {
	return a.t.MaxWriteTime(ctx, row, family, columns...)
}

func (a tableTarget) WriteTime(ctx context.Context, item bigtable.ReadItem) (time.Time, error) {
	return a.t.WriteTime(ctx, item)
}

func (a tableTarget) ReadRow(ctx context.Context, row string, f bigtable.Filter) (bigtable.Row, error) {
	return a.t.ReadRow(ctx, row, readOpts(f)...)
}

func (a tableTarget) ReadRows(ctx context.Context, rs bigtable.RowSet, f bigtable.Filter, fn func(bigtable.Row) bool) error {
	return a.t.ReadRows(ctx, rs, fn, readOpts(f)...)
}

func readOpts(f bigtable.Filter) []bigtable.ReadOption {
	if f == nil {
		return nil
	}
	return []bigtable.ReadOption{bigtable.RowFilter(f)}
}

func toMutation(ops []model.Op) *ttlclient.Mutation {
	m := ttlclient.NewMutation()
	for _, o := range ops {
		v := []byte(o.Value)
		switch o.Kind {
		case model.SetTTL:
			m.SetTTL(o.Family, o.Column, o.TTL, v)
		case model.SetSeq:
			m.SetVersion(o.Family, o.Column, o.Seq, v)
		case model.SetAuto:
			m.Set(o.Family, o.Column, bigtable.ServerTime, v)
		case model.SetExplicit:
			m.Set(o.Family, o.Column, bigtable.Timestamp(o.TS), v)
		default:
			addDelete(m, o)
		}
	}
	return m
}

// deleter is the delete methods ttlclient.Mutation and bigtable.Mutation
// share.
type deleter interface {
	DeleteCellsInColumn(family, column string)
	DeleteTimestampRange(family, column string, start, end bigtable.Timestamp)
	DeleteCellsInFamily(family string)
	DeleteRow()
}

func addDelete(m deleter, o model.Op) {
	switch o.Kind {
	case model.DeleteColumn:
		m.DeleteCellsInColumn(o.Family, o.Column)
	case model.DeleteRange:
		m.DeleteTimestampRange(o.Family, o.Column, bigtable.Timestamp(o.TS), bigtable.Timestamp(o.End))
	case model.DeleteFamily:
		m.DeleteCellsInFamily(o.Family)
	case model.DeleteRow:
		m.DeleteRow()
	}
}

// toBigtable builds ops as a *bigtable.Mutation; stamp gives a Set's
// timestamp (an error refuses the whole mutation: nothing is sent).
func toBigtable(ops []model.Op, stamp func(o model.Op) (bigtable.Timestamp, error)) (*bigtable.Mutation, error) {
	if ops == nil {
		return nil, nil
	}
	m := bigtable.NewMutation()
	for _, o := range ops {
		switch o.Kind {
		case model.SetTTL, model.SetSeq, model.SetAuto, model.SetExplicit:
			ts, err := stamp(o)
			if err != nil {
				return nil, err
			}
			m.Set(o.Family, o.Column, ts, []byte(o.Value))
		default:
			addDelete(m, o)
		}
	}
	return m, nil
}

// APITarget is ttlclient.Table.API(): code written against
// bigtable.TableAPI, building *bigtable.Mutation. A TTL is
// Table.Timestamp(family, ttl), a sequence number seq*1000, a cell without
// either bigtable.ServerTime (the library assigns the family's default).
func APITarget(t *ttlclient.Table) Target {
	stamp := func(o model.Op) (bigtable.Timestamp, error) {
		switch o.Kind {
		case model.SetTTL:
			return t.Timestamp(o.Family, o.TTL)
		case model.SetSeq:
			return bigtable.Timestamp(o.Seq * 1000), nil
		case model.SetAuto:
			return bigtable.ServerTime, nil
		}
		return bigtable.Timestamp(o.TS), nil
	}
	return bigtableTarget{api: t.API(), stamp: stamp, filter: func(f bigtable.Filter) bigtable.Filter { return f },
		lower: func(ops []model.Op, _ time.Time) []model.Op { return truncateExplicit(ops) }}
}

// WireTarget is a plain *bigtable.Table whose connection carries the wire
// guard. The program computes a TTL's timestamp itself (lowerWire) and
// sends bigtable.ServerTime for a cell without one. When compose is set
// (the guard has no WithReadFilter) the program puts the library's TTL
// filter in front of its own read filters and predicates
// (filters.Builder.Compose at clock's time); otherwise the guard does.
func WireTarget(tbl *bigtable.Table, schema strategy.Schema, clock Clock, compose bool) (Target, error) {
	filter := func(f bigtable.Filter) bigtable.Filter { return f }
	if compose {
		fb, err := filters.New(schema)
		if err != nil {
			return nil, err
		}
		filter = func(f bigtable.Filter) bigtable.Filter {
			return fb.Compose(bigtable.Timestamp(clock.Now().UnixMicro()), f)
		}
	}
	stamp := func(o model.Op) (bigtable.Timestamp, error) {
		switch o.Kind {
		case model.SetExplicit:
			return bigtable.Timestamp(o.TS), nil
		case model.SetAuto:
			return bigtable.ServerTime, nil
		}
		return 0, fmt.Errorf("conformance: %s reached a plain client unlowered", o)
	}
	return bigtableTarget{api: tbl, stamp: stamp, filter: filter,
		lower: func(ops []model.Op, now time.Time) []model.Op { return lowerWire(schema, ops, now) }}, nil
}

// truncateExplicit truncates explicit timestamps to the millisecond, as
// bigtable.Mutation.Set does before bttl or the guard sees them: a
// sequence timestamp that is not seq*1000 arrives as the version below it.
func truncateExplicit(ops []model.Op) []model.Op {
	out := make([]model.Op, len(ops))
	for i, o := range ops {
		if o.Kind == model.SetExplicit && o.TS >= 0 {
			o.TS -= o.TS % 1000
		}
		out[i] = o
	}
	return out
}

// lowerWire is what a plain client sends for ops: a TTL becomes the
// timestamp a program computes by hand, now + ttl (less D on a
// default-expiry family) truncated to the millisecond, with no cap and no
// check, a sequence number seq*1000, explicit timestamps truncated: the
// guard checks what arrives.
func lowerWire(schema strategy.Schema, ops []model.Op, now time.Time) []model.Op {
	out := truncateExplicit(ops)
	for i, o := range out {
		switch o.Kind {
		case model.SetTTL:
			d := o.TTL
			if p := schema[o.Family]; p.Kind() == strategy.KindDefaultExpiry {
				d -= p.DefaultTTL()
			}
			o.Kind, o.TTL = model.SetExplicit, 0
			o.TS = int64(strategy.Millis(bigtable.Timestamp(now.Add(d).UnixMicro())))
		case model.SetSeq:
			o.Kind, o.TS, o.Seq = model.SetExplicit, o.Seq*1000, 0
		}
		out[i] = o
	}
	return out
}

// bigtableTarget is a path built on *bigtable.Mutation: stamp gives a
// Set's timestamp (an error refuses the mutation, nothing sent), filter
// what the program reads and conditions with, lower what it can express.
type bigtableTarget struct {
	api    bigtable.TableAPI
	stamp  func(model.Op) (bigtable.Timestamp, error)
	filter func(bigtable.Filter) bigtable.Filter
	lower  func([]model.Op, time.Time) []model.Op
}

func (b bigtableTarget) Lower(ops []model.Op, now time.Time) []model.Op { return b.lower(ops, now) }

func (b bigtableTarget) Apply(ctx context.Context, row string, ops []model.Op) error {
	m, err := toBigtable(ops, b.stamp)
	if err != nil {
		return err
	}
	return b.api.Apply(ctx, row, m)
}

// ApplyBulk sends the rows whose timestamps stamp takes; a row it refuses
// fails at its index without being sent.
func (b bigtableTarget) ApplyBulk(ctx context.Context, rows []string, ops [][]model.Op) ([]error, error) {
	errs := make([]error, len(rows))
	var sendRows []string
	var send []*bigtable.Mutation
	var at []int
	for i, o := range ops {
		m, err := toBigtable(o, b.stamp)
		if err != nil {
			errs[i] = err
			continue
		}
		sendRows, send, at = append(sendRows, rows[i]), append(send, m), append(at, i)
	}
	if len(send) == 0 {
		return errs, nil
	}
	sent, err := b.api.ApplyBulk(ctx, sendRows, send)
	if err != nil {
		return nil, err
	}
	for j, e := range sent {
		errs[at[j]] = e
	}
	return errs, nil
}

func (b bigtableTarget) CondApply(ctx context.Context, row string, cond bigtable.Filter, tops, fops []model.Op) error {
	mt, err := toBigtable(tops, b.stamp)
	if err != nil {
		return err
	}
	mf, err := toBigtable(fops, b.stamp)
	if err != nil {
		return err
	}
	return b.api.Apply(ctx, row, bigtable.NewCondMutation(b.filter(cond), mt, mf))
}

func (b bigtableTarget) ReadRow(ctx context.Context, row string, f bigtable.Filter) (bigtable.Row, error) {
	return b.api.ReadRow(ctx, row, readOpts(b.filter(f))...)
}

func (b bigtableTarget) ReadRows(ctx context.Context, rs bigtable.RowSet, f bigtable.Filter, fn func(bigtable.Row) bool) error {
	return b.api.ReadRows(ctx, rs, fn, readOpts(b.filter(f))...)
}

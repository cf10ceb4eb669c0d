package expiry

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bttl/bttl/changestream"
	"github.com/bttl/bttl/strategy"
)

// Event is one managed cell whose expiry instant passed while it was
// stored.
type Event struct {
	// Table is the watched table's ID.
	Table  string
	Family string
	Column string
	// RowKey is the cell's row key; nil with WithKeyRedaction.
	RowKey []byte
	// Key is the row key as bttl's messages show it: quoted, or redacted.
	Key string
	// Timestamp is the cell's timestamp.
	Timestamp time.Time
	// Expiry is the instant the family's strategy gives the cell
	// (strategy.Policy.ExpiryTime).
	Expiry time.Time
	// At is when the event was emitted (WithClock's time).
	At time.Time
	// Delay is At minus Expiry.
	Delay time.Duration
	// Collected says the event comes from the GARBAGE_COLLECTION change
	// that deleted the cell before a worker read it.
	Collected bool
}

// MarshalJSON writes the event as one JSON object: "event":"expired",
// times in RFC 3339 UTC, the row key in base64 (omitted when redacted)
// and as text, the delay in seconds.
func (e Event) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Event        string  `json:"event"`
		Table        string  `json:"table"`
		Family       string  `json:"family"`
		Column       string  `json:"column"`
		RowKey       []byte  `json:"row_key,omitempty"`
		Key          string  `json:"key"`
		Timestamp    string  `json:"timestamp"`
		Expiry       string  `json:"expiry"`
		At           string  `json:"at"`
		DelaySeconds float64 `json:"delay_seconds"`
		Collected    bool    `json:"collected,omitempty"`
	}{"expired", e.Table, e.Family, e.Column, e.RowKey, e.Key, rfc3339(e.Timestamp), rfc3339(e.Expiry), rfc3339(e.At), e.Delay.Seconds(), e.Collected})
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Callback receives each event. Returning nil acknowledges it: only then
// does its index entry leave the timers (for ExpiredFamily). An error stops Run (or the stream's Run, for
// an event from a GC change), which returns it; the event is given again
// later.
type Callback func(ctx context.Context, e Event) error

// Notifier schedules the expiries of a table's managed cells from its
// change stream and announces them. See the package doc.
type Notifier struct {
	table     string
	indexName string
	data      *bigtable.Table
	index     *bigtable.Table
	schema    strategy.Schema
	stream    changestream.Store
	cb        Callback
	cfg       config
	stock     *prometheus.GaugeVec // nil without WithRegisterer

	mu          sync.Mutex
	nextRecheck time.Time
}

// New returns a notifier for table (its ID) whose families' strategies
// schema gives, read through client, keeping its timer index in
// indexTable of the same instance (families TimerFamily, LeaseFamily and
// ExpiredFamily, no GC rule). stream is the Store of the consumer feeding Handle: its
// low watermark says when a cell found missing can be dropped.
func New(client *bigtable.Client, table string, schema strategy.Schema, indexTable string, stream changestream.Store, cb Callback, opts ...Option) (*Notifier, error) {
	cfg := config{bucket: DefaultBucket, poll: DefaultPollInterval, lease: DefaultLease, rpcTimeout: DefaultRPCTimeout, clock: realClock{}, count: 1, recheck: DefaultRecheck}
	for _, o := range opts {
		o.apply(&cfg)
	}
	if client == nil || table == "" || indexTable == "" || stream == nil || cb == nil {
		return nil, fmt.Errorf("%w: client, table, index table, stream store and callback are required", ErrInvalidOption)
	}
	if err := cfg.validate(table); err != nil {
		return nil, err
	}
	if err := schema.Validate(); err != nil {
		return nil, err
	}
	n := &Notifier{
		table: table, indexName: indexTable, data: client.Open(table), index: client.Open(indexTable),
		schema: schema, stream: stream, cb: cb, cfg: cfg,
	}
	if cfg.reg != nil {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: StockMetricName,
			Help: "Cells of bttl-managed families announced expired (read back stored past their expiry) whose GC record the change stream has not given yet, counted in the expiry index.",
		}, []string{"table", "family"})
		if err := cfg.reg.Register(g); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
			existing, ok := are.ExistingCollector.(*prometheus.GaugeVec)
			if !ok {
				return nil, err
			}
			g = existing
		}
		n.stock = g
	}
	return n, nil
}

// entry is one scheduled cell: its index qualifier is
// uvarint(len(family)) family uvarint(len(column)) column, the timestamp
// as 8 bytes big-endian, then the row key.
type entry struct {
	family, column string
	ts             bigtable.Timestamp
	row            string
}

func (e entry) qualifier() string {
	b := binary.AppendUvarint(nil, uint64(len(e.family)))
	b = append(b, e.family...)
	b = binary.AppendUvarint(b, uint64(len(e.column)))
	b = append(b, e.column...)
	b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
	return string(append(b, e.row...))
}

func parseEntry(q string) (entry, error) {
	b := []byte(q)
	var e entry
	for _, f := range []*string{&e.family, &e.column} {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return entry{}, ErrBadEntry
		}
		*f = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	if len(b) < 8 {
		return entry{}, ErrBadEntry
	}
	e.ts = bigtable.Timestamp(binary.BigEndian.Uint64(b))
	e.row = string(b[8:])
	return e, nil
}

// expiry is the entry's instant, zero if its family is not managed by age.
func (n *Notifier) expiry(e entry) time.Time {
	p, ok := n.schema[e.family]
	if !ok {
		return time.Time{}
	}
	return p.ExpiryTime(e.ts)
}

// bucketKey is the index row of instants in t's bucket: the prefix, then
// the bucket's number (Unix milliseconds over the width, at least 0) as
// 16 hex digits, so rows sort by time.
func (n *Notifier) bucketKey(t time.Time) string {
	b := t.UnixMilli() / n.cfg.bucket.Milliseconds()
	if t.UnixMilli() < 0 {
		b = 0
	}
	return fmt.Sprintf("%s%016x", n.cfg.prefix, uint64(b))
}

func (n *Notifier) bucketStart(key string) (time.Time, int64, bool) {
	var b uint64
	if _, err := fmt.Sscanf(strings.TrimPrefix(key, n.cfg.prefix), "%016x", &b); err != nil || b > math.MaxInt64/uint64(n.cfg.bucket.Milliseconds()) {
		return time.Time{}, 0, false
	}
	return time.UnixMilli(int64(b) * n.cfg.bucket.Milliseconds()), int64(b), true
}

// managed returns the policy of a cell that expires by age, and whether
// it is one: not a write-time companion nor a reserved qualifier.
func (n *Notifier) managed(family, column string) (strategy.Policy, bool) {
	p, ok := n.schema[family]
	if !ok || p.ExpiryTime(0).IsZero() {
		return p, false
	}
	if p.Reserved(column) {
		return p, false
	}
	return p, true
}

func (n *Notifier) errorf(op, table, row string, err error) error {
	return &Error{Op: op, Table: table, Row: row, Err: err, keys: n.cfg.keys}
}

func (n *Notifier) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, n.cfg.rpcTimeout)
}

// Handle is a changestream.Handler: it schedules every managed cell a user
// change writes, and announces the cells a GC change deletes past their
// expiry that no worker announced yet. Index writes are done before it
// returns, so the consumer checkpoints a change only once its cells are
// scheduled.
func (n *Notifier) Handle(ctx context.Context, c changestream.Change) error {
	switch c.Type {
	case changestream.User:
		return n.schedule(ctx, c)
	case changestream.GarbageCollection:
		return n.collected(ctx, c)
	}
	return nil
}

func (n *Notifier) schedule(ctx context.Context, c changestream.Change) error {
	muts := map[string]*bigtable.Mutation{}
	var keys []string
	for _, m := range c.Mutations {
		sc := m.GetSetCell()
		if sc == nil {
			continue
		}
		p, ok := n.managed(sc.GetFamilyName(), string(sc.GetColumnQualifier()))
		if !ok {
			continue
		}
		ts := bigtable.Timestamp(sc.GetTimestampMicros())
		if ts < 0 {
			// "Use -1 for current Bigtable server time": the commit's.
			ts = bigtable.Timestamp(c.CommitTime.UnixMilli() * 1000)
		}
		e := entry{family: sc.GetFamilyName(), column: string(sc.GetColumnQualifier()), ts: ts, row: string(c.RowKey)}
		k := n.bucketKey(p.ExpiryTime(ts))
		if muts[k] == nil {
			muts[k] = bigtable.NewMutation()
			keys = append(keys, k)
		}
		muts[k].Set(TimerFamily, e.qualifier(), 0, nil)
	}
	if len(keys) == 0 {
		return nil
	}
	ms := make([]*bigtable.Mutation, len(keys))
	for i, k := range keys {
		ms[i] = muts[k]
	}
	cctx, cancel := n.call(ctx)
	defer cancel()
	errs, err := n.index.ApplyBulk(cctx, keys, ms)
	if err == nil && len(errs) > 0 {
		err = errors.Join(errs...)
	}
	if err != nil {
		return n.errorf("schedule", n.indexName, keys[0], err)
	}
	return nil
}

func (n *Notifier) collected(ctx context.Context, c changestream.Change) error {
	for _, m := range c.Mutations {
		d := m.GetDeleteFromColumn()
		if d == nil || d.GetTimeRange().GetStartTimestampMicros() <= 0 {
			continue // no single cell named (see package gclag)
		}
		p, ok := n.managed(d.GetFamilyName(), string(d.GetColumnQualifier()))
		if !ok {
			continue
		}
		e := entry{family: d.GetFamilyName(), column: string(d.GetColumnQualifier()), ts: bigtable.Timestamp(d.GetTimeRange().GetStartTimestampMicros()), row: string(c.RowKey)}
		exp := p.ExpiryTime(e.ts)
		key := n.bucketKey(exp)
		if c.CommitTime.Before(exp) {
			// Collected before it expired (a version limit): it never
			// expired while stored.
			if err := n.drop(ctx, key, e, nil); err != nil {
				return err
			}
			continue
		}
		q := e.qualifier()
		cctx, cancel := n.call(ctx)
		r, err := n.index.ReadRow(cctx, key, bigtable.RowFilter(bigtable.InterleaveFilters(
			bigtable.ColumnRangeFilter(TimerFamily, q, q+"\x00"),
			bigtable.ColumnRangeFilter(ExpiredFamily, q, q+"\x00"))))
		cancel()
		if err != nil {
			return n.errorf("read", n.indexName, key, err)
		}
		if len(r[TimerFamily]) == 0 && len(r[ExpiredFamily]) == 0 {
			continue // never scheduled, or its GC record was handled already
		}
		if len(r[TimerFamily]) > 0 {
			// Not announced yet: the GC record proves it was stored past
			// its instant.
			if err := n.emit(ctx, e, exp, true); err != nil {
				return err
			}
		}
		// Collected: out of the stock, in both families at once.
		m := bigtable.NewMutation()
		m.DeleteCellsInColumn(TimerFamily, q)
		m.DeleteCellsInColumn(ExpiredFamily, q)
		cctx, cancel = n.call(ctx)
		err = n.index.Apply(cctx, key, m)
		cancel()
		if err != nil {
			return n.errorf("delete entry", n.indexName, key, err)
		}
	}
	return nil
}

func (n *Notifier) emit(ctx context.Context, e entry, exp time.Time, collected bool) error {
	at := n.cfg.clock.Now()
	ev := Event{
		Table: n.table, Family: e.family, Column: e.column, Key: n.cfg.keys.Key(e.row),
		Timestamp: time.UnixMicro(int64(e.ts)), Expiry: exp, At: at, Delay: at.Sub(exp), Collected: collected,
	}
	if !n.cfg.keys.Redacts() {
		ev.RowKey = []byte(e.row)
	}
	return n.cb(ctx, ev)
}

// announced moves an announced cell's entry from TimerFamily to
// ExpiredFamily in one atomic row mutation: it is then in the stock of
// expired cells not yet collected until its GC record arrives (or a
// recheck finds the cell gone).
func (n *Notifier) announced(ctx context.Context, key string, e entry) error {
	m := bigtable.NewMutation()
	m.DeleteCellsInColumn(TimerFamily, e.qualifier())
	m.Set(ExpiredFamily, e.qualifier(), 0, nil)
	cctx, cancel := n.call(ctx)
	defer cancel()
	if err := n.index.Apply(cctx, key, m); err != nil {
		return n.errorf("move entry", n.indexName, key, err)
	}
	return nil
}

// drop deletes an entry; with mark, only while its value is still mark
// (a write scheduling the cell again since is kept).
func (n *Notifier) drop(ctx context.Context, key string, e entry, mark []byte) error {
	m := bigtable.NewMutation()
	m.DeleteCellsInColumn(TimerFamily, e.qualifier())
	if mark != nil {
		m = bigtable.NewCondMutation(bigtable.ChainFilters(
			bigtable.ColumnRangeFilter(TimerFamily, e.qualifier(), e.qualifier()+"\x00"),
			bigtable.ValueFilter("(?s)"+regexp.QuoteMeta(string(mark)))), m, nil)
	}
	cctx, cancel := n.call(ctx)
	defer cancel()
	if err := n.index.Apply(cctx, key, m); err != nil {
		return n.errorf("delete entry", n.indexName, key, err)
	}
	return nil
}

package expiry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/strategy"
)

// maxFailures is how many polls in a row may fail (the index or the table
// unreachable) before Run gives up.
const maxFailures = 10

const leaseColumn = "lease"

// Run announces due cells every poll interval until ctx is done (it
// returns ctx's error), the Callback fails (its error), or maxFailures
// polls in a row failed (the last failure).
func (n *Notifier) Run(ctx context.Context) error {
	t := time.NewTicker(n.cfg.poll)
	defer t.Stop()
	failures := 0
	for {
		_, err := n.Poll(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil:
			failures = 0
		case errors.As(err, new(*callbackError)):
			return err
		default:
			if failures++; failures >= maxFailures {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }
func (e *callbackError) Unwrap() error { return e.err }

// Poll does one round of Run: it claims the due buckets it may, announces
// their due cells still stored, and drops the others. It returns how many
// events it emitted.
func (n *Notifier) Poll(ctx context.Context) (int, error) {
	now := n.cfg.clock.Now()
	end := n.bucketKey(now) + "\x00"
	type bucket struct {
		key   string
		lease string
		cells []bigtable.ReadItem
	}
	var due []bucket
	cctx, cancel := n.call(ctx)
	err := n.index.ReadRows(cctx, bigtable.NewRange(n.cfg.prefix, end), func(r bigtable.Row) bool {
		b := bucket{key: r.Key(), cells: r[TimerFamily]}
		for _, it := range r[LeaseFamily] {
			b.lease = string(it.Value)
		}
		if len(b.cells) > 0 {
			due = append(due, b)
		}
		return true
	}, bigtable.RowFilter(bigtable.ChainFilters(
		// Announced cells (ExpiredFamily) are the recheck's, not due.
		bigtable.FamilyFilter("^["+TimerFamily+LeaseFamily+"]$"),
		bigtable.LatestNFilter(1))))
	cancel()
	if err != nil {
		return 0, n.errorf("read buckets", n.indexName, n.cfg.prefix, err)
	}
	emitted := 0
	var wm *time.Time
	for _, b := range due {
		start, num, ok := n.bucketStart(b.key)
		if !ok {
			continue // not a bucket row
		}
		if int(num%int64(n.cfg.count)) != n.cfg.index && now.Sub(start) < n.cfg.lease {
			continue // its preferred worker's, while that one may be up
		}
		owner, expires := decodeLease(b.lease)
		if owner != "" && owner != n.cfg.owner && now.Before(expires) {
			continue
		}
		leaseEnd := now.Add(n.cfg.lease)
		if ok, err := n.acquire(ctx, b.key, b.lease, leaseEnd); err != nil || !ok {
			if err != nil {
				return emitted, err
			}
			continue
		}
		k, err := n.process(ctx, b.key, b.cells, now, leaseEnd, &wm)
		emitted += k
		if err != nil {
			return emitted, err
		}
		if err := n.release(ctx, b.key, leaseEnd); err != nil {
			return emitted, err
		}
	}
	if err := n.recheckIfDue(ctx, now); err != nil {
		return emitted, err
	}
	return emitted, nil
}

// recheckIfDue counts the announced cells awaiting their GC record, per
// family, into the stock gauge, once every WithRecheck interval. Every
// worker counts the whole index under its prefix, from the index itself,
// so the count is the same on each of N workers and right after a
// restart; each worker also reads back the cells of its own buckets (the
// bucket number modulo the worker count) and drops those no longer
// stored: deleted or overwritten by a user, which no GC record follows.
func (n *Notifier) recheckIfDue(ctx context.Context, now time.Time) error {
	n.mu.Lock()
	due := !now.Before(n.nextRecheck)
	n.mu.Unlock()
	if !due {
		return nil
	}
	type cell struct {
		key string
		num int64
		e   entry
	}
	var cells []cell
	cctx, cancel := n.call(ctx)
	err := n.index.ReadRows(cctx, bigtable.PrefixRange(n.cfg.prefix), func(r bigtable.Row) bool {
		_, num, ok := n.bucketStart(r.Key())
		if !ok {
			return true // not a bucket row
		}
		for _, it := range r[ExpiredFamily] {
			if e, err := parseEntry(strings.TrimPrefix(it.Column, ExpiredFamily+":")); err == nil {
				cells = append(cells, cell{r.Key(), num, e})
			}
		}
		return true
	}, bigtable.RowFilter(bigtable.ChainFilters(
		bigtable.FamilyFilter("^"+ExpiredFamily+"$"),
		bigtable.StripValueFilter())))
	cancel()
	if err != nil {
		return n.errorf("read announced cells", n.indexName, n.cfg.prefix, err)
	}
	counts := map[string]int{}
	for _, c := range cells {
		if int(c.num%int64(n.cfg.count)) == n.cfg.index {
			stored, err := n.stored(ctx, c.e)
			if err != nil {
				return err
			}
			if !stored {
				m := bigtable.NewMutation()
				m.DeleteCellsInColumn(ExpiredFamily, c.e.qualifier())
				cctx, cancel := n.call(ctx)
				err := n.index.Apply(cctx, c.key, m)
				cancel()
				if err != nil {
					return n.errorf("delete entry", n.indexName, c.key, err)
				}
				continue
			}
		}
		counts[c.e.family]++
	}
	if n.stock != nil {
		for f, p := range n.schema {
			if !p.ExpiryTime(0).IsZero() || counts[f] > 0 {
				n.stock.WithLabelValues(n.table, f).Set(float64(counts[f]))
			}
		}
	}
	n.mu.Lock()
	n.nextRecheck = now.Add(n.cfg.recheck)
	n.mu.Unlock()
	return nil
}

func (n *Notifier) process(ctx context.Context, key string, cells []bigtable.ReadItem, now, leaseEnd time.Time, wm **time.Time) (int, error) {
	emitted := 0
	for _, it := range cells {
		// Stop well before the lease lapses: another worker may then take
		// the bucket, and the rest waits for the next poll.
		if !n.cfg.clock.Now().Before(leaseEnd.Add(-n.cfg.lease / 3)) {
			return emitted, nil
		}
		e, err := parseEntry(strings.TrimPrefix(it.Column, TimerFamily+":"))
		if err != nil {
			continue // not ours: left alone
		}
		exp := n.expiry(e)
		if exp.IsZero() || exp.After(now) {
			continue // not due (or its family is no longer managed by age)
		}
		stored, err := n.stored(ctx, e)
		if err != nil {
			return emitted, err
		}
		if stored {
			if err := n.emit(ctx, e, exp, false); err != nil {
				return emitted, &callbackError{fmt.Errorf("bttl: expiry: callback: %w", err)}
			}
			emitted++
			if err := n.announced(ctx, key, e); err != nil {
				return emitted, err
			}
			continue
		}
		if len(it.Value) == 0 {
			// Found missing: kept until the stream is known to have given
			// every change committed before now (a GC deletion among them
			// announces the cell).
			if err := n.mark(ctx, key, e, now); err != nil {
				return emitted, err
			}
			continue
		}
		missing, err := strconv.ParseInt(string(it.Value), 10, 64)
		if err != nil {
			continue
		}
		if *wm == nil {
			w, err := n.watermark(ctx)
			if err != nil {
				return emitted, err
			}
			*wm = &w
		}
		if !(*wm).Before(time.UnixMicro(missing)) {
			if err := n.drop(ctx, key, e, it.Value); err != nil {
				return emitted, err
			}
		}
	}
	return emitted, nil
}

// stored reads the cell back from the watched table, no TTL filter: is a
// cell still stored in its column at its timestamp?
func (n *Notifier) stored(ctx context.Context, e entry) (bool, error) {
	f := bigtable.ChainFilters(
		bigtable.FamilyFilter("^"+regexp.QuoteMeta(e.family)+"$"),
		bigtable.ColumnRangeFilter(e.family, e.column, e.column+"\x00"),
		bigtable.TimestampRangeFilterMicros(strategy.Millis(e.ts), strategy.MilliEnd(e.ts)),
		bigtable.StripValueFilter(),
	)
	cctx, cancel := n.call(ctx)
	defer cancel()
	r, err := n.data.ReadRow(cctx, e.row, bigtable.RowFilter(f))
	if err != nil {
		return false, n.errorf("read", n.table, e.row, err)
	}
	for _, it := range r[e.family] {
		if it.Timestamp == e.ts {
			return true, nil
		}
	}
	return false, nil
}

func (n *Notifier) mark(ctx context.Context, key string, e entry, now time.Time) error {
	m := bigtable.NewMutation()
	m.Set(TimerFamily, e.qualifier(), 0, []byte(strconv.FormatInt(now.UnixMicro(), 10)))
	cctx, cancel := n.call(ctx)
	defer cancel()
	if err := n.index.Apply(cctx, key, m); err != nil {
		return n.errorf("mark entry", n.indexName, key, err)
	}
	return nil
}

// watermark is the stream's low watermark as its Store records it: the
// lowest of the open partitions' (zero while one has none yet); every
// change committed before it was handled. A stream whose partitions all
// ended has handled everything.
func (n *Notifier) watermark(ctx context.Context) (time.Time, error) {
	cctx, cancel := n.call(ctx)
	defer cancel()
	_, states, err := n.stream.List(cctx)
	if err != nil {
		return time.Time{}, n.errorf("list stream partitions", n.table, "", err)
	}
	var low time.Time
	open := false
	for _, st := range states {
		if st.Done {
			continue
		}
		if st.Watermark.IsZero() {
			return time.Time{}, nil
		}
		if !open || st.Watermark.Before(low) {
			low = st.Watermark
		}
		open = true
	}
	if !open && len(states) > 0 {
		return time.UnixMicro(math.MaxInt64), nil
	}
	return low, nil
}

func encodeLease(owner string, expires time.Time) string {
	return owner + "|" + strconv.FormatInt(expires.UnixMilli(), 10)
}

func decodeLease(s string) (string, time.Time) {
	i := strings.LastIndexByte(s, '|')
	if i < 0 {
		return "", time.Time{}
	}
	ms, _ := strconv.ParseInt(s[i+1:], 10, 64)
	return s[:i], time.UnixMilli(ms)
}

func (n *Notifier) leaseFilter(value string) bigtable.Filter {
	return bigtable.ChainFilters(
		bigtable.FamilyFilter("^"+LeaseFamily+"$"),
		bigtable.ColumnFilter("^"+leaseColumn+"$"),
		bigtable.ValueFilter("(?s)"+regexp.QuoteMeta(value)),
	)
}

// acquire replaces the bucket's lease by this worker's if it is still
// prev (or still absent), comparing it whole.
func (n *Notifier) acquire(ctx context.Context, key, prev string, until time.Time) (bool, error) {
	set := bigtable.NewMutation()
	set.Set(LeaseFamily, leaseColumn, 0, []byte(encodeLease(n.cfg.owner, until)))
	var m *bigtable.Mutation
	if prev == "" {
		m = bigtable.NewCondMutation(n.leaseFilter(".*"), nil, set)
	} else {
		m = bigtable.NewCondMutation(n.leaseFilter(prev), set, nil)
	}
	var matched bool
	cctx, cancel := n.call(ctx)
	defer cancel()
	if err := n.index.Apply(cctx, key, m, bigtable.GetCondMutationResult(&matched)); err != nil {
		return false, n.errorf("acquire lease", n.indexName, key, err)
	}
	return matched == (prev != ""), nil
}

// release deletes the bucket's lease while it is still this worker's.
func (n *Notifier) release(ctx context.Context, key string, until time.Time) error {
	del := bigtable.NewMutation()
	del.DeleteCellsInColumn(LeaseFamily, leaseColumn)
	cctx, cancel := n.call(ctx)
	defer cancel()
	if err := n.index.Apply(cctx, key, bigtable.NewCondMutation(n.leaseFilter(encodeLease(n.cfg.owner, until)), del, nil)); err != nil {
		return n.errorf("release lease", n.indexName, key, err)
	}
	return nil
}

package ttlclient_test

import (
	"context"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/require"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

const (
	famOne   = "one"   // one-second expiry
	famDef   = "def"   // default expiry, D = 1h
	famSeq   = "seq"   // sequence, N = 3
	famPlain = "plain" // unmanaged
	defaultD = time.Hour
)

func mixedSchema() strategy.Schema {
	return strategy.Schema{
		famOne:   strategy.OneSecond(),
		famDef:   strategy.DefaultExpiry(defaultD),
		famSeq:   strategy.Sequence(3),
		famPlain: strategy.Unmanaged(),
	}
}

type env struct {
	h   *bttestharness.Harness
	tbl *ttlclient.Table
	ctx context.Context
}

func newEnv(t *testing.T, schema strategy.Schema, opts ...ttlclient.TableOption) *env {
	t.Helper()
	h := bttestharness.New(t)
	return &env{h: h, tbl: h.MustTable(t, "t", schema, opts...), ctx: context.Background()}
}

// newEnvNoGC is newEnv on a server whose garbage collection is off: for
// tests whose cells the server's GC, which runs on the real clock, would
// collect while the test's clock stands still.
func newEnvNoGC(t *testing.T, schema strategy.Schema, opts ...ttlclient.TableOption) *env {
	t.Helper()
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	return &env{h: h, tbl: h.MustTable(t, "t", schema, opts...), ctx: context.Background()}
}

func (e *env) now() bigtable.Timestamp { return bigtable.Time(e.h.Clock.Now()) }

// stored is every cell physically stored in row, as family:column@ts=value.
func (e *env) stored(t *testing.T, row string) []string {
	t.Helper()
	r, err := e.h.Stored(e.ctx, e.tbl.Name(), row)
	require.NoError(t, err)
	return cells(r)
}

// read is what the library returns for row.
func (e *env) read(t *testing.T, row string, opts ...bigtable.ReadOption) []string {
	t.Helper()
	r, err := e.tbl.ReadRow(e.ctx, row, opts...)
	require.NoError(t, err)
	return cells(r)
}

func (e *env) apply(t *testing.T, row string, m *ttlclient.Mutation) {
	t.Helper()
	require.NoError(t, e.tbl.Apply(e.ctx, row, m))
}

func cells(r bigtable.Row) []string {
	var out []string
	for _, items := range r {
		for _, it := range items {
			out = append(out, cellString(it))
		}
	}
	sort.Strings(out)
	return out
}

func cellString(it bigtable.ReadItem) string {
	return it.Column + "@" + itoa(int64(it.Timestamp)) + "=" + string(it.Value)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// storedTimestamp is the timestamp of the only stored cell of fam:col.
func (e *env) storedTimestamp(t *testing.T, row, fam, col string) bigtable.Timestamp {
	t.Helper()
	return storedTimestampIn(t, e.h, e.tbl.Name(), row, fam, col)
}

// storedTimestampIn is the timestamp of the only stored cell of fam:col in
// table.
func storedTimestampIn(t *testing.T, h *bttestharness.Harness, table, row, fam, col string) bigtable.Timestamp {
	t.Helper()
	r, err := h.Stored(context.Background(), table, row)
	require.NoError(t, err)
	var found []bigtable.Timestamp
	for _, it := range r[fam] {
		if it.Column == fam+":"+col {
			found = append(found, it.Timestamp)
		}
	}
	require.Len(t, found, 1, "cells of %s:%s", fam, col)
	return found[0]
}

// quietLogger drops the WithoutVerify warning, which would land in the
// middle of test and benchmark output.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// cellOpt says how a test sets a cell: with its own TTL (Mutation.SetTTL),
// its version (SetVersion), or neither (Set).
type cellOpt struct {
	ttl time.Duration
	seq int64
	set bool // seq, not ttl
}

func withTTL(d time.Duration) cellOpt { return cellOpt{ttl: d} }
func withSeq(n int64) cellOpt         { return cellOpt{seq: n, set: true} }

// setCell sets fam:col in m: Set with ts when no option is given, else
// SetTTL or SetVersion with the one option (ts then unused).
func setCell(m *ttlclient.Mutation, fam, col string, ts bigtable.Timestamp, v []byte, opts ...cellOpt) {
	switch {
	case len(opts) == 0:
		m.Set(fam, col, ts, v)
	case opts[0].set:
		m.SetVersion(fam, col, opts[0].seq, v)
	default:
		m.SetTTL(fam, col, opts[0].ttl, v)
	}
}

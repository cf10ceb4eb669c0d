package wireguard_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
	"github.com/bttl/bttl/wireguard"
)

// seamSchema has a family of each option the guard must enforce the way
// bttl's client does.
var seamSchema = strategy.Schema{
	"sv":    strategy.OneSecond(strategy.SingleValue()),
	"svwt":  strategy.DefaultExpiry(time.Hour, strategy.SingleValue(), strategy.WithWriteTime()),
	"wt":    strategy.OneSecond(strategy.WithWriteTime()),
	"plain": strategy.Unmanaged(),
}

// seamEnv is a plain client through the guard (installed with
// ClientOptions) on table "t" of seamSchema, and bttl's client on the
// same server without the guard.
type seamEnv struct {
	h   *bttestharness.Harness
	tbl *bigtable.Table  // plain, guarded
	bt  *ttlclient.Table // bttl's reads
	ctx context.Context
}

// serverNames are the servers startServer starts.
var serverNames = []string{"bttest", "cbtemulator"}

// startServer starts the in-process server or cbtemulator, with clients
// on it, for the test.
func startServer(t *testing.T, server string, cfg bttestharness.Config) *bttestharness.Harness {
	t.Helper()
	if server == "cbtemulator" {
		h, _ := bttestharness.NewOnEmulator(t, cfg)
		return h
	}
	h, err := bttestharness.StartWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// onBothServers runs f on the in-process server and on cbtemulator, with
// the server's GC off (what is stored is what the writes left).
func onBothServers(t *testing.T, f func(t *testing.T, e *seamEnv)) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "") // the client dials the endpoint itself
	for _, server := range serverNames {
		t.Run(server, func(t *testing.T) {
			f(t, newSeamEnv(t, startServer(t, server, bttestharness.Config{NoGC: true})))
		})
	}
}

// guardedClient is a plain client dialled to addr with g installed
// through ClientOptions.
func guardedClient(t *testing.T, addr string, g *wireguard.Guard) *bigtable.Client {
	t.Helper()
	plain, err := bigtable.NewClientWithConfig(context.Background(), bttestharness.Project, bttestharness.Instance,
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}, DisableSession: true},
		append([]option.ClientOption{option.WithEndpoint(addr), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials()))}, g.ClientOptions()...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = plain.Close() })
	return plain
}

func newSeamEnv(t *testing.T, h *bttestharness.Harness) *seamEnv {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, h.CreateTable(ctx, "t", seamSchema))
	g, err := wireguard.New(map[string]strategy.Schema{"t": seamSchema}, wireguard.WithClock(h.Clock))
	require.NoError(t, err)
	bt, err := h.Client.Open(context.Background(), "t", seamSchema)
	require.NoError(t, err)
	return &seamEnv{h: h, tbl: guardedClient(t, h.Addr, g).Open("t"), bt: bt, ctx: ctx}
}

// expiring is the timestamp of a cell of family fam expiring ttl from now.
func (e *seamEnv) expiring(fam string, ttl time.Duration) bigtable.Timestamp {
	ts, err := seamSchema[fam].WriteTimestamp(e.h.Clock.Now(), ttl)
	if err != nil {
		panic(err)
	}
	return ts
}

func (e *seamEnv) stored(t *testing.T, row string) bigtable.Row {
	t.Helper()
	r, err := e.h.Stored(e.ctx, "t", row)
	require.NoError(t, err)
	return r
}

// values lists the values of a row's cells in family fam, column c, as
// stored.
func values(r bigtable.Row, fam, c string) []string {
	var out []string
	for _, it := range r[fam] {
		if it.Column == fam+":"+c {
			out = append(out, string(it.Value))
		}
	}
	return out
}

// Through the guard, a plain client's writes to a SingleValue family replace
// the column's older cells, as bttl's client's do: "first" with a 2h TTL then
// "second" with 1h leaves "second" alone, and bttl's LatestNFilter(1) read
// returns it. It holds for MutateRow, every MutateRows entry, both
// CheckAndMutateRow branches, two Sets of one column in one request (the last
// wins), and in a family with write times (the companion of the replaced cell
// goes too) (issue 26 item 3).
func TestGuardEnforcesSingleValue(t *testing.T) {
	onBothServers(t, func(t *testing.T, e *seamEnv) {
		set := func(fam, v string, ttl time.Duration) *bigtable.Mutation {
			m := bigtable.NewMutation()
			m.Set(fam, "c", e.expiring(fam, ttl), []byte(v))
			return m
		}
		// wantSecond: the row holds "second" alone (and its companion in a
		// write-time family), and bttl's read of the newest cell says so.
		wantSecond := func(t *testing.T, row, fam string) {
			t.Helper()
			stored := e.stored(t, row)
			assert.Equal(t, []string{"second"}, values(stored, fam, "c"), "row %s family %s", row, fam)
			want := 1
			if seamSchema[fam].HasWriteTime() {
				want = 2 // the cell and its companion
			}
			assert.Len(t, stored[fam], want, "row %s: %v", row, stored[fam])
			got, err := e.bt.ReadRow(e.ctx, row, bigtable.RowFilter(bigtable.LatestNFilter(1)))
			require.NoError(t, err)
			if assert.Len(t, got[fam], 1, row) {
				assert.Equal(t, "second", string(got[fam][0].Value), row)
			}
		}
		for _, fam := range []string{"sv", "svwt"} {
			// MutateRow: two requests.
			require.NoError(t, e.tbl.Apply(e.ctx, "apply-"+fam, set(fam, "first", 2*time.Hour)))
			require.NoError(t, e.tbl.Apply(e.ctx, "apply-"+fam, set(fam, "second", time.Hour)))
			wantSecond(t, "apply-"+fam, fam)

			// One request, two Sets of the column: the last wins.
			both := set(fam, "first", 2*time.Hour)
			both.Set(fam, "c", e.expiring(fam, time.Hour), []byte("second"))
			require.NoError(t, e.tbl.Apply(e.ctx, "one-request-"+fam, both))
			wantSecond(t, "one-request-"+fam, fam)

			// MutateRows: every entry.
			rows := []string{"bulk-a-" + fam, "bulk-b-" + fam}
			errs, err := e.tbl.ApplyBulk(e.ctx, rows, []*bigtable.Mutation{set(fam, "first", 2*time.Hour), set(fam, "first", 2*time.Hour)})
			require.NoError(t, err)
			require.Nil(t, errs)
			errs, err = e.tbl.ApplyBulk(e.ctx, rows, []*bigtable.Mutation{set(fam, "second", time.Hour), set(fam, "second", time.Hour)})
			require.NoError(t, err)
			require.Nil(t, errs)
			for _, row := range rows {
				wantSecond(t, row, fam)
			}

			// CheckAndMutateRow: the true branch, then the false branch.
			for _, branch := range []bool{true, false} {
				row := "cond-" + fam
				if !branch {
					row = "cond-false-" + fam
				}
				require.NoError(t, e.tbl.Apply(e.ctx, row, set(fam, "first", 2*time.Hour)))
				pred := bigtable.FamilyFilter("plain") // the row has no plain cell: false
				if branch {
					pred = bigtable.FamilyFilter(fam)
				}
				var cond *bigtable.Mutation
				if branch {
					cond = bigtable.NewCondMutation(pred, set(fam, "second", time.Hour), nil)
				} else {
					cond = bigtable.NewCondMutation(pred, nil, set(fam, "second", time.Hour))
				}
				var matched bool
				require.NoError(t, e.tbl.Apply(e.ctx, row, cond, bigtable.GetCondMutationResult(&matched)))
				require.Equal(t, branch, matched)
				wantSecond(t, row, fam)
			}
		}
		// Families that are not SingleValue keep every version.
		require.NoError(t, e.tbl.Apply(e.ctx, "multi", set("wt", "first", 2*time.Hour)))
		require.NoError(t, e.tbl.Apply(e.ctx, "multi", set("wt", "second", time.Hour)))
		assert.ElementsMatch(t, []string{"first", "second"}, values(e.stored(t, "multi"), "wt", "c"))
	})
}

// The guard stores no write-time companion it did not compute. A plain
// client's companion beside its Set (1 µs after the epoch, garbage bytes, or a
// plausible time) is refused, on MutateRow, MutateRows and CheckAndMutateRow,
// and nothing of the request is written; the cell sent alone gets the guard's
// own companion, so WriteTime reports the time it was written, never 1970
// (issue 26 item 4).
func TestGuardStoresNoCompanionItDidNotCompute(t *testing.T) {
	onBothServers(t, func(t *testing.T, e *seamEnv) {
		now := e.h.Clock.Now()
		for _, fam := range []string{"wt", "svwt"} {
			ts := e.expiring(fam, time.Hour)
			for name, forged := range map[string][]byte{
				"epoch+1µs": strategy.WriteTimeValue(1),
				"garbage":   []byte("garbage"),
				"plausible": strategy.WriteTimeValue(bigtable.Time(now.Add(-time.Hour))),
			} {
				m := bigtable.NewMutation()
				m.Set(fam, "c", ts, []byte("v"))
				m.Set(fam, strategy.WriteTimeColumn("c"), ts, forged)
				err := e.tbl.Apply(e.ctx, "r", m)
				assert.Equal(t, codes.FailedPrecondition, status.Code(err), "%s %s: %v", fam, name, err)
				assert.ErrorContains(t, err, "rule "+wireguard.RuleReservedColumn, "%s %s", fam, name)

				ok := bigtable.NewMutation()
				ok.Set("plain", "c", ts, []byte("p"))
				_, err = e.tbl.ApplyBulk(e.ctx, []string{"ok", "r"}, []*bigtable.Mutation{ok, m})
				assert.Equal(t, codes.FailedPrecondition, status.Code(err), "%s %s bulk: %v", fam, name, err)

				cond := bigtable.NewCondMutation(bigtable.PassAllFilter(), m, nil)
				err = e.tbl.Apply(e.ctx, "r", cond)
				assert.Equal(t, codes.FailedPrecondition, status.Code(err), "%s %s cond: %v", fam, name, err)
			}
			assert.Empty(t, e.stored(t, "r"), "nothing of a refused request is written")
			assert.Empty(t, e.stored(t, "ok"), "a refused bulk writes none of its entries")

			// The cell alone: the guard's companion, the guard's clock.
			alone := bigtable.NewMutation()
			alone.Set(fam, "c", ts, []byte("v"))
			require.NoError(t, e.tbl.Apply(e.ctx, "alone-"+fam, alone))
			row, err := e.bt.ReadRow(e.ctx, "alone-"+fam)
			require.NoError(t, err)
			require.Len(t, row[fam], 1)
			wt, err := e.bt.WriteTime(e.ctx, row[fam][0])
			require.NoError(t, err)
			assert.True(t, now.Truncate(time.Millisecond).Equal(wt), "%s: write time %s, want %s", fam, wt, now)
		}
	})
}

// A retried write to a SingleValue family ends as one attempt would: the
// client resends its original request (MutateRow) or its unfinished
// entries (MutateRows), the guard adds the delete again, and the column
// holds the last value alone. The server applies the second write's first
// attempt and answers Unavailable with no entry status, as when a reply
// is lost.
func TestGuardSingleValueSurvivesRetries(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "")
	var unary, bulk atomic.Int64
	loseUnary := grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !strings.HasSuffix(info.FullMethod, "/MutateRow") {
			return h(ctx, req)
		}
		resp, err := h(ctx, req)
		if unary.Add(1) == 2 { // the second write's first attempt
			return nil, status.Error(codes.Unavailable, "reply lost")
		}
		return resp, err
	})
	loseBulk := grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if !strings.HasSuffix(info.FullMethod, "/MutateRows") || bulk.Add(1) != 2 {
			return h(srv, ss)
		}
		if err := h(srv, silentStream{ss}); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "reply lost")
	})
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{NoGC: true, ServerOptions: []grpc.ServerOption{loseUnary, loseBulk}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	e := newSeamEnv(t, h)
	for _, v := range []struct {
		value string
		ttl   time.Duration
	}{{"first", 2 * time.Hour}, {"second", time.Hour}} {
		m := bigtable.NewMutation()
		m.Set("svwt", "c", e.expiring("svwt", v.ttl), []byte(v.value))
		require.NoError(t, e.tbl.Apply(e.ctx, "r", m))
		errs, err := e.tbl.ApplyBulk(e.ctx, []string{"b1", "b2"}, []*bigtable.Mutation{m, m})
		require.NoError(t, err)
		require.Nil(t, errs)
	}
	require.Equal(t, int64(3), unary.Load(), "the second MutateRow was retried once")
	require.Equal(t, int64(3), bulk.Load(), "the second MutateRows was retried once")
	for _, row := range []string{"r", "b1", "b2"} {
		stored := e.stored(t, row)
		assert.Equal(t, []string{"second"}, values(stored, "svwt", "c"), row)
		assert.Len(t, stored["svwt"], 2, "%s: the cell and its companion: %v", row, stored["svwt"])
	}
}

// silentStream drops what the server sends: the client learns nothing of
// the entries applied.
type silentStream struct{ grpc.ServerStream }

func (silentStream) SendMsg(any) error { return nil }

// A conditional mutation is refused for the same rule whichever branch
// holds which cell: every cell of both branches is checked before either
// branch's companions, as ttlclient checks it. (The composition matrix
// found the guard saying reserved-column where ttlclient and the model
// say the false branch's server timestamp.)
func TestGuardChecksBothBranchesBeforeCompanions(t *testing.T) {
	onBothServers(t, func(t *testing.T, e *seamEnv) {
		ts := e.expiring("wt", time.Hour)
		forged := bigtable.NewMutation()
		forged.Set("wt", "c", ts, []byte("v"))
		forged.Set("wt", strategy.WriteTimeColumn("c"), ts, strategy.WriteTimeValue(1))
		server := bigtable.NewMutation()
		server.Set("wt", "d", bigtable.ServerTime, []byte("w")) // one-second, no default TTL
		for name, cond := range map[string]*bigtable.Mutation{
			"forged then server": bigtable.NewCondMutation(bigtable.PassAllFilter(), forged, server),
			"server then forged": bigtable.NewCondMutation(bigtable.PassAllFilter(), server, forged),
		} {
			err := e.tbl.Apply(e.ctx, "r", cond)
			assert.Equal(t, codes.FailedPrecondition, status.Code(err), name)
			assert.ErrorContains(t, err, "rule "+wireguard.RuleServerTimestamp, name)
		}
		assert.Empty(t, e.stored(t, "r"))
	})
}

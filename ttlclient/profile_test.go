package ttlclient_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
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
	"github.com/bttl/bttl/bttest_harness/prodserver"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// The production-rules server's profiles (bttest_harness/prodserver,
// profile.go and Server.resolve: CheckAndMutateRow and ReadModifyWriteRow
// need single-cluster routing with allow_transactional_writes; a Data
// Boost profile refuses every write).
const (
	profTxn   = "txn"
	profNoTxn = "single-no-txn"
	profMulti = "multi"
	profBoost = "boost"
)

var profileSchema = strategy.Schema{
	"d": strategy.DefaultExpiry(48 * time.Hour),
	"u": strategy.Unmanaged(),
}

// profileServer is a one-cluster production-rules server with the four
// profiles and the table "t" of profileSchema, created through the
// harness (the instance's default profile, transactional on one cluster).
func profileServer(t *testing.T) *prodserver.Server {
	t.Helper()
	s := prodserver.New(t, prodserver.Config{Profiles: []prodserver.AppProfile{
		prodserver.SingleCluster(profTxn, prodserver.DefaultCluster, true),
		prodserver.SingleCluster(profNoTxn, prodserver.DefaultCluster, false),
		prodserver.MultiCluster(profMulti),
		prodserver.DataBoost(profBoost, prodserver.DefaultCluster),
	}})
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{Addr: s.Addr, NoGC: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	h.MustTable(t, "t", profileSchema)
	return s
}

// profileClient is a ttlclient client on s, created as a user would
// (NewClientWithConfig on a connection dialled with DialOptions).
func profileClient(t *testing.T, s *prodserver.Server, cfg ttlclient.ClientConfig) *ttlclient.Client {
	t.Helper()
	conn, err := grpc.NewClient(s.Addr, append(ttlclient.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	cfg.MetricsProvider = bigtable.NoopMetricsProvider{}
	c, err := ttlclient.NewClientWithConfig(context.Background(), bttestharness.Project, bttestharness.Instance, cfg, option.WithGRPCConn(conn))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// requireProfileError asserts err is the typed refusal of profile: the
// sentinel, the *ProfileError naming the profile and the fix, and the
// server's gRPC code.
func requireProfileError(t *testing.T, err error, sentinel error, profile, call string) {
	t.Helper()
	require.ErrorIs(t, err, sentinel)
	var pe *ttlclient.ProfileError
	require.True(t, errors.As(err, &pe), "%T %v", err, err)
	assert.Equal(t, profile, pe.Profile)
	assert.Equal(t, call, pe.Call)
	assert.Equal(t, codes.FailedPrecondition, status.Code(err))
	assert.Contains(t, err.Error(), "docs/design.md#app-profiles")
	assert.Contains(t, err.Error(), `"`+profile+`"`)
}

func writeCell(t *testing.T, tbl *ttlclient.Table, row string) {
	t.Helper()
	m := ttlclient.NewMutation()
	m.SetTTL("d", "c", time.Hour, []byte("v"))
	require.NoError(t, tbl.Apply(context.Background(), row, m))
}

// A multi-cluster profile refuses single-row transactions: Expire, a
// conditional mutation and ApplyReadModifyWrite come back typed, naming
// the profile; with TransactionalAppProfile the same calls go through the
// transactional profile and succeed, while plain writes stay on the
// multi-cluster one.
func TestMultiClusterProfileRefusesTransactions(t *testing.T) {
	s := profileServer(t)
	ctx := context.Background()
	tbl, err := profileClient(t, s, ttlclient.ClientConfig{ClientConfig: bigtable.ClientConfig{AppProfile: profMulti}}).Open(ctx, "t", profileSchema)
	require.NoError(t, err)
	writeCell(t, tbl, "r")

	_, err = tbl.Expire(ctx, "r", "d", "c", 2*time.Hour)
	requireProfileError(t, err, ttlclient.ErrTransactionsNotAllowed, profMulti, "CheckAndMutateRow")
	cond := ttlclient.NewMutation()
	cond.Set("u", "c", 1000, []byte("v"))
	err = tbl.Apply(ctx, "r", ttlclient.NewCondMutation(bigtable.PassAllFilter(), cond, nil))
	requireProfileError(t, err, ttlclient.ErrTransactionsNotAllowed, profMulti, "CheckAndMutateRow")
	rmw := ttlclient.NewReadModifyWrite()
	rmw.Increment("u", "n", 1)
	_, err = tbl.ApplyReadModifyWrite(ctx, "r", rmw)
	requireProfileError(t, err, ttlclient.ErrTransactionsNotAllowed, profMulti, "ReadModifyWriteRow")

	before := s.Counts().Refused
	tx, err := profileClient(t, s, ttlclient.ClientConfig{ClientConfig: bigtable.ClientConfig{AppProfile: profMulti}, TransactionalAppProfile: profTxn}).Open(ctx, "t", profileSchema)
	require.NoError(t, err)
	writeCell(t, tx, "r2")
	applied, err := tx.Expire(ctx, "r2", "d", "c", 2*time.Hour)
	require.NoError(t, err)
	assert.True(t, applied)
	_, err = tx.ApplyReadModifyWrite(ctx, "r2", rmw)
	require.NoError(t, err)
	assert.Equal(t, before, s.Counts().Refused, "nothing refused through the transactional profile")
}

// A single-cluster profile without allow_transactional_writes refuses
// them too.
func TestSingleClusterProfileWithoutTransactionsRefusesThem(t *testing.T) {
	s := profileServer(t)
	ctx := context.Background()
	tbl, err := profileClient(t, s, ttlclient.ClientConfig{ClientConfig: bigtable.ClientConfig{AppProfile: profNoTxn}}).Open(ctx, "t", profileSchema)
	require.NoError(t, err)
	writeCell(t, tbl, "r")
	_, err = tbl.ExpireRow(ctx, "r", 2*time.Hour)
	requireProfileError(t, err, ttlclient.ErrTransactionsNotAllowed, profNoTxn, "CheckAndMutateRow")
}

// A Data Boost profile refuses every write: Apply, ApplyBulk and API's
// Apply come back typed.
func TestDataBoostProfileRefusesWrites(t *testing.T) {
	s := profileServer(t)
	ctx := context.Background()
	tbl, err := profileClient(t, s, ttlclient.ClientConfig{ClientConfig: bigtable.ClientConfig{AppProfile: profBoost}}).Open(ctx, "t", profileSchema)
	require.NoError(t, err)
	m := ttlclient.NewMutation()
	m.SetTTL("d", "c", time.Hour, []byte("v"))
	err = tbl.Apply(ctx, "r", m)
	requireProfileError(t, err, ttlclient.ErrReadOnlyProfile, profBoost, "MutateRow")

	// The server refuses the whole request: the call's error is typed (the
	// client gives no per-row errors for a request refused whole).
	errs, err := tbl.ApplyBulk(ctx, []string{"a", "b"}, []*ttlclient.Mutation{m, m})
	requireProfileError(t, err, ttlclient.ErrReadOnlyProfile, profBoost, "MutateRows")
	for _, e := range errs {
		requireProfileError(t, e, ttlclient.ErrReadOnlyProfile, profBoost, "MutateRows")
	}

	bm := bigtable.NewMutation()
	bm.Set("u", "c", 1000, []byte("v"))
	err = tbl.API().Apply(ctx, "r", bm)
	requireProfileError(t, err, ttlclient.ErrReadOnlyProfile, profBoost, "Apply")
}

// Open reads the profiles with the instance admin client it is given: a
// multi-cluster profile for the transactions of a schema with an idle TTL
// fails Open with a *ProfileError naming it; without an idle TTL Open
// succeeds and warns; with a transactional profile Open is silent.
func TestOpenChecksProfiles(t *testing.T) {
	s := profileServer(t)
	ctx := context.Background()
	idle := strategy.Schema{"i": strategy.OneSecond(strategy.WithIdleTTL(time.Hour, strategy.DefaultIdleDebounce))}
	h, err := bttestharness.StartWithConfig(ctx, bttestharness.Config{Addr: s.Addr})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	require.NoError(t, h.CreateTable(ctx, "idle", idle))

	conn, err := grpc.NewClient(s.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	iac, err := bigtable.NewInstanceAdminClient(ctx, bttestharness.Project, option.WithGRPCConn(conn))
	require.NoError(t, err)
	check := ttlclient.WithInstanceAdminClient(iac, bttestharness.Instance)

	var logs bytes.Buffer
	logger := ttlclient.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	multi := profileClient(t, s, ttlclient.ClientConfig{ClientConfig: bigtable.ClientConfig{AppProfile: profMulti}, Options: []ttlclient.ClientOption{check, logger}})
	_, err = multi.Open(ctx, "idle", idle)
	requireProfileError(t, err, ttlclient.ErrTransactionsNotAllowed, profMulti, "Open")

	_, err = multi.Open(ctx, "t", profileSchema)
	require.NoError(t, err)
	assert.Contains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), "Expire, ExpireColumn, ExpireRow")

	logs.Reset()
	tx := profileClient(t, s, ttlclient.ClientConfig{ClientConfig: bigtable.ClientConfig{AppProfile: profMulti}, TransactionalAppProfile: profTxn,
		Options: []ttlclient.ClientOption{check, logger}})
	_, err = tx.Open(ctx, "idle", idle)
	require.NoError(t, err)
	assert.Empty(t, logs.String())
}

// The lifecycle operations of issue 37 are single-row transactions too:
// on a multi-cluster profile each comes back typed, naming the profile;
// with TransactionalAppProfile each goes through the transactional one.
func TestLifecycleOperationsUseTheTransactionalProfile(t *testing.T) {
	s := profileServer(t)
	ctx := context.Background()
	ops := map[string]func(tbl *ttlclient.Table, row string) error{
		"ExpireAt": func(tbl *ttlclient.Table, row string) error {
			_, err := tbl.ExpireAt(ctx, row, "d", "c", time.Now().Add(3*time.Hour))
			return err
		},
		"Persist": func(tbl *ttlclient.Table, row string) error {
			_, err := tbl.Persist(ctx, row, "d", "c")
			return err
		},
		"SetKeepTTL": func(tbl *ttlclient.Table, row string) error {
			_, err := tbl.SetKeepTTL(ctx, row, "d", "c", []byte("w"))
			return err
		},
		"ReadRowAndExpire": func(tbl *ttlclient.Table, row string) error {
			_, _, err := tbl.ReadRowAndExpire(ctx, row, bigtable.FamilyFilter("^d$"), 2*time.Hour)
			return err
		},
	}
	multi, err := profileClient(t, s, ttlclient.ClientConfig{ClientConfig: bigtable.ClientConfig{AppProfile: profMulti}}).Open(ctx, "t", profileSchema)
	require.NoError(t, err)
	tx, err := profileClient(t, s, ttlclient.ClientConfig{ClientConfig: bigtable.ClientConfig{AppProfile: profMulti}, TransactionalAppProfile: profTxn}).Open(ctx, "t", profileSchema)
	require.NoError(t, err)
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			writeCell(t, multi, "m-"+name)
			requireProfileError(t, op(multi, "m-"+name), ttlclient.ErrTransactionsNotAllowed, profMulti, "CheckAndMutateRow")
			writeCell(t, tx, "t-"+name)
			before := s.Counts().Refused
			require.NoError(t, op(tx, "t-"+name))
			assert.Equal(t, before, s.Counts().Refused, "nothing refused through the transactional profile")
		})
	}
}

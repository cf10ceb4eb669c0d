package sessionserver_test

import (
	"context"
	"os"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/bttest_harness/sessionserver"
)

func TestMain(m *testing.M) {
	// A client under BIGTABLE_EMULATOR_HOST is given a connection and
	// builds no session plane: these tests dial their own server.
	os.Unsetenv("BIGTABLE_EMULATOR_HOST")
	os.Exit(m.Run())
}

// setup is a server with session load 1, a client with sessions on whose
// calls go through sessions, and one with sessions off.
func setup(t *testing.T) (b *backend, onClient, offClient *bigtable.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	b, err = startBackend(ctx, sessionserver.Config{SessionLoad: 1})
	require.NoError(t, err)
	t.Cleanup(b.srv.Close)
	onClient, err = b.client(ctx, false)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, onClient.Close()) })
	offClient, err = b.client(ctx, true)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, offClient.Close()) })
	require.NoError(t, b.awaitSessions(ctx, onClient.Open("events")))
	return b, onClient, offClient
}

// events opens table "events" on both clients.
func events(onClient, offClient *bigtable.Client) (on, off *bigtable.Table) {
	return onClient.Open("events"), offClient.Open("events")
}

func TestSessionsCarryWritesAndReads(t *testing.T) {
	b, onClient, offClient := setup(t)
	on, off := events(onClient, offClient)
	ctx := context.Background()

	before := b.sess.Stats()
	m := bigtable.NewMutation()
	m.Set("a", "x", 1000, []byte("one"))
	m.Set("a", "x", 2000, []byte("two"))
	m.Set("a", "y", 1000, []byte("y"))
	m.Set("b", "z", 3000, []byte("z"))
	require.NoError(t, on.Apply(ctx, "row", m))
	got, err := on.ReadRow(ctx, "row")
	require.NoError(t, err)
	after := b.sess.Stats()
	require.Greater(t, after.Sessions, before.Sessions, "the first write opens the table's write sessions")
	require.Equal(t, sessionserver.Stats{VirtualMutateRows: 1, VirtualReadRows: 1}, delta(before, after),
		"the write and the read went through sessions, neither through the classic RPCs")
	want := bigtable.Row{
		"a": {
			{Row: "row", Column: "a:x", Timestamp: 2000, Value: []byte("two")},
			{Row: "row", Column: "a:x", Timestamp: 1000, Value: []byte("one")},
			{Row: "row", Column: "a:y", Timestamp: 1000, Value: []byte("y")},
		},
		"b": {{Row: "row", Column: "b:z", Timestamp: 3000, Value: []byte("z")}},
	}
	require.Equal(t, want, got)

	before = b.sess.Stats()
	classic, err := off.ReadRow(ctx, "row")
	require.NoError(t, err)
	require.Equal(t, want, classic, "the classic plane reads the same storage")
	require.Equal(t, sessionserver.Stats{ReadRows: 1}, delta(before, b.sess.Stats()))
}

// A virtual ReadRow carries the caller's filter, and returns what the
// classic ReadRows returns with it (labels included); a row without cells
// is nil on both planes.
func TestVirtualReadRowFilterMatchesClassic(t *testing.T) {
	b, onClient, offClient := setup(t)
	on, off := events(onClient, offClient)
	ctx := context.Background()
	m := bigtable.NewMutation()
	for _, ts := range []bigtable.Timestamp{1000, 2000, 3000} {
		m.Set("a", "x", ts, []byte("a-x"))
		m.Set("b", "y", ts, []byte("b-y"))
	}
	require.NoError(t, off.Apply(ctx, "row", m))

	filters := map[string]bigtable.Filter{
		"latest":        bigtable.LatestNFilter(1),
		"family b":      bigtable.FamilyFilter("^b$"),
		"labelled":      bigtable.ChainFilters(bigtable.LatestNFilter(2), bigtable.LabelFilter("l")),
		"strip values":  bigtable.StripValueFilter(),
		"nothing":       bigtable.BlockAllFilter(),
		"from 2000 on":  bigtable.TimestampRangeFilterMicros(2000, 0),
		"interleaved":   bigtable.InterleaveFilters(bigtable.FamilyFilter("^a$"), bigtable.LatestNFilter(1)),
		"column x only": bigtable.ColumnFilter("^x$"),
	}
	for name, f := range filters {
		t.Run(name, func(t *testing.T) {
			before := b.sess.Stats()
			got, err := on.ReadRow(ctx, "row", bigtable.RowFilter(f))
			require.NoError(t, err)
			require.Equal(t, int64(1), delta(before, b.sess.Stats()).VirtualReadRows)
			want, err := off.ReadRow(ctx, "row", bigtable.RowFilter(f))
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
	before := b.sess.Stats()
	got, err := on.ReadRow(ctx, "no such row")
	require.NoError(t, err)
	require.Nil(t, got)
	require.Equal(t, int64(1), delta(before, b.sess.Stats()).VirtualReadRows)
}

// An error of the backend reaches the caller with its code, as on the
// classic plane.
func TestVirtualErrorKeepsItsCode(t *testing.T) {
	b, onClient, offClient := setup(t)
	on, off := onClient.Open("missing"), offClient.Open("missing")
	ctx := context.Background()
	m := bigtable.NewMutation()
	m.Set("a", "x", 1000, []byte("v"))
	before := b.sess.Stats()
	errOn := on.Apply(ctx, "row", m)
	require.Equal(t, int64(1), delta(before, b.sess.Stats()).VirtualMutateRows)
	errOff := off.Apply(ctx, "row", m)
	require.Error(t, errOff)
	require.Error(t, errOn)
	require.Equal(t, status.Code(errOff), status.Code(errOn))
	require.NotEqual(t, codes.Unknown, status.Code(errOn))
}

func TestNewRefusesBadConfig(t *testing.T) {
	for name, cfg := range map[string]sessionserver.Config{
		"load above 1":     {SessionLoad: 1.5},
		"negative load":    {SessionLoad: -0.1},
		"crossed bounds":   {MinSessions: 3, MaxSessions: 2},
		"negative minimum": {MinSessions: -1},
	} {
		_, err := sessionserver.New(cfg)
		require.Error(t, err, name)
	}
}

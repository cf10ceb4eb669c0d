package wireguard_test

import (
	"context"

	"google.golang.org/grpc"
	"sync"
	"testing"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/wireguard"
)

// refusalLog is a wireguard.Recorder keeping what it was given.
type refusalLog struct {
	mu  sync.Mutex
	got [][3]string
}

func (l *refusalLog) GuardRefused(table, family, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, [3]string{table, family, reason})
}

func (l *refusalLog) take() [][3]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.got
	l.got = nil
	return out
}

// The guard recorded no refusal. With WithRecorder each one is counted once,
// on unary and streamed calls, with bounded labels: the guarded table, a
// family of its schema (a family outside it is ""), the rule in snake_case; a
// call naming no guarded table has table "". A call the guard lets through
// counts nothing (issue 27).
func TestGuardRecordsRefusals(t *testing.T) {
	log := &refusalLog{}
	e := newEnv(t, wireguard.WithRecorder(log))

	m := bigtable.NewMutation()
	m.Set("one", "token", bigtable.ServerTime, []byte("v"))
	require.Error(t, e.tbl.Apply(e.ctx, "user#secret", m)) // MutateRow: unary
	assert.Equal(t, [][3]string{{"legacy", "one", "server_timestamp"}}, log.take())

	m = bigtable.NewMutation()
	m.Set("nosuch", "c", bigtable.Now(), []byte("v"))
	errs, err := e.tbl.ApplyBulk(e.ctx, []string{"a"}, []*bigtable.Mutation{m}) // MutateRows: a stream
	require.True(t, err != nil || (len(errs) == 1 && errs[0] != nil), "refused")
	assert.Equal(t, [][3]string{{"legacy", "", "unknown_family"}}, log.take(), "a family outside the schema is not a label")

	_, err = e.plain.PrepareStatement(e.ctx, "SELECT _key FROM legacy", nil)
	require.Error(t, err)
	assert.Equal(t, [][3]string{{"", "", "unfiltered_sql"}}, log.take())

	m = bigtable.NewMutation()
	m.Set("plain", "c", bigtable.Now(), []byte("v"))
	require.NoError(t, e.tbl.Apply(e.ctx, "ok", m))
	assert.Empty(t, log.take(), "a call let through counts nothing")
}

// A refusal whose subject names no guarded table (an undeclared
// materialized view's resource name, "projects/p/..."), labels no table,
// even when a guarded table is called "projects": the reviewer's case.
func TestGuardRefusalOfAViewLabelsNoTable(t *testing.T) {
	log := &refusalLog{}
	g, err := wireguard.New(map[string]strategy.Schema{"projects": legacySchema},
		wireguard.WithReadFilter(), wireguard.WithRecorder(log))
	require.NoError(t, err)
	_, err = sendReadRows(t, g, &btpb.ReadRowsRequest{MaterializedViewName: "projects/p/instances/i/materializedViews/other"})
	require.Error(t, err)
	assert.Equal(t, [][3]string{{"", "", "undeclared_materialized_view"}}, log.take())
}

// The Recorder's labels were parsed back out of the refusal's subject
// ("TABLE/FAMILY:COLUMN"). They now come from the refusal itself: a
// domain-scoped project, a column holding '/' and ':' (quoted or redacted in
// the subject) leave them as they are (issue 35 item 7 / issue 34).
func TestGuardLabelsComeFromTheRefusal(t *testing.T) {
	log := &refusalLog{}
	g, err := wireguard.New(map[string]strategy.Schema{"t": {"one": strategy.OneSecond(), "two": strategy.OneSecond()}},
		wireguard.WithRecorder(log), wireguard.WithKeyRedaction([]byte("k")))
	require.NoError(t, err)
	for _, fam := range []string{"one", "two"} {
		req := &btpb.MutateRowRequest{TableName: "projects/example.com:p/instances/i/tables/t", RowKey: []byte("r"),
			Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
				FamilyName: fam, ColumnQualifier: []byte("x/y:z"), TimestampMicros: -1}}}}}
		invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
			t.Fatal("a refused request was sent")
			return nil
		}
		err := g.UnaryClientInterceptor()(context.Background(), "/google.bigtable.v2.Bigtable/MutateRow", req, &btpb.MutateRowResponse{}, nil, invoker)
		require.Error(t, err)
		assert.Equal(t, [][3]string{{"t", fam, "server_timestamp"}}, log.take(), fam)
	}
}

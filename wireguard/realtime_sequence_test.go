package wireguard_test

import (
	"testing"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/wireguard"
)

// A real time sent as a sequence family's timestamp (what a legacy writer
// sends) would outrank every sequence number: refused, nothing stored.
func TestGuardRefusesRealTimeInSequenceFamily(t *testing.T) {
	servers(t, func(t *testing.T, addr string) {
		e := newInstanceEnv(t, addr, "p", "i", wireguard.WithReadFilter())
		ts := e.now().TruncateToMilliseconds()
		err := e.conn.Invoke(e.ctx, "/google.bigtable.v2.Bigtable/MutateRow",
			&btpb.MutateRowRequest{TableName: e.tableName, RowKey: []byte("s"), Mutations: []*btpb.Mutation{{Mutation: &btpb.Mutation_SetCell_{SetCell: &btpb.Mutation_SetCell{
				FamilyName: "seq", ColumnQualifier: []byte("c"), TimestampMicros: int64(ts), Value: []byte("legacy")}}}}}, &btpb.MutateRowResponse{})
		assert.Equal(t, codes.FailedPrecondition, status.Code(err), "a real time accepted as a sequence number: %v", err)
		assert.Nil(t, e.stored(t, "legacy", "s"))
	})
}

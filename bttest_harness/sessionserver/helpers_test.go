package sessionserver_test

import (
	"context"
	"fmt"

	"cloud.google.com/go/bigtable"
	"cloud.google.com/go/bigtable/bttest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bttl/bttl/bttest_harness/sessionserver"
)

const (
	project  = "p"
	instance = "i"
)

// backend is a bttest server serving s's session plane, with table
// "events" (families "a" and "b") created.
type backend struct {
	srv  *bttest.Server
	sess *sessionserver.Server
}

func startBackend(ctx context.Context, cfg sessionserver.Config) (*backend, error) {
	sess, err := sessionserver.New(cfg)
	if err != nil {
		return nil, err
	}
	srv, err := bttest.NewServer("127.0.0.1:0", sess.ServerOptions()...)
	if err != nil {
		return nil, err
	}
	admin, err := bigtable.NewAdminClient(ctx, project, instance, dialOptions(srv.Addr)...)
	if err != nil {
		srv.Close()
		return nil, err
	}
	defer admin.Close()
	err = admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "events", Families: map[string]bigtable.GCPolicy{
		"a": bigtable.NoGcPolicy(), "b": bigtable.NoGcPolicy(),
	}})
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("create table: %w", err)
	}
	return &backend{srv: srv, sess: sess}, nil
}

// dialOptions make a client dial addr itself, as it must to build its
// session plane (one given a connection builds none).
func dialOptions(addr string) []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// client is a raw client on b; sessions off with disableSession.
func (b *backend) client(ctx context.Context, disableSession bool) (*bigtable.Client, error) {
	return bigtable.NewClientWithConfig(ctx, project, instance,
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}, DisableSession: disableSession},
		dialOptions(b.srv.Addr)...)
}

// awaitSessions returns once a ReadRow of tbl went through a session.
func (b *backend) awaitSessions(ctx context.Context, tbl *bigtable.Table) error {
	return b.sess.AwaitSessions(ctx, func(ctx context.Context) error {
		_, err := tbl.ReadRow(ctx, "probe")
		return err
	})
}

// delta is the calls the server counted between two snapshots. The
// configuration polls and session openings, which the client makes in the
// background at any time, are left out.
func delta(before, after sessionserver.Stats) sessionserver.Stats {
	return sessionserver.Stats{
		VirtualReadRows:   after.VirtualReadRows - before.VirtualReadRows,
		VirtualMutateRows: after.VirtualMutateRows - before.VirtualMutateRows,
		ReadRows:          after.ReadRows - before.ReadRows,
		MutateRow:         after.MutateRow - before.MutateRow,
	}
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sync"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	gtransport "google.golang.org/api/transport/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/changestream"
	"github.com/bttl/bttl/changestream/expiry"
	"github.com/bttl/bttl/changestream/gclag"
	"github.com/bttl/bttl/internal/keytext"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/strategy"
)

// watchStreamFamily is the family of the -state table holding the
// change stream's partitions, tokens and leases.
const watchStreamFamily = "cs"

var watchCommand = command{
	name: "watch", needsSchema: true, args: "TABLE",
	synopsis: []string{"[-state TABLE] [-worker I/N] [-start TIME] [-poll D] [-gc] [-redact-keys] TABLE"},
	short:    "announce managed cells as they expire (and GC as it collects them), as JSON lines, from the change stream",
	help: `Reads TABLE's change stream (it must be enabled) and prints one JSON line
per managed cell whose expiry instant passed while it was stored:
{"event":"expired","table","family","column","row_key" (base64),"key",
"timestamp","expiry","at","delay_seconds"}, times RFC 3339 UTC, soon after
each instant (within -poll once the stream delivered the write). With -gc
it also prints {"event":"gc",...,"lag_seconds"} for each GC deletion of a
managed cell (package changestream/gclag). Delivery is at least once: a
restarted watch may print an event again (docs/design.md#expiry-index).

The timer index and the stream's tokens are kept in the -state table
(created with families t, l, x and cs when missing), so a killed watch
resumes where it was; -worker I/N (or the job runner's task index) shares
the work among N processes. Runs until -timeout (then exits 0), Ctrl-C, or
an error (exit 2). -redact-keys prints row keys as keyed hashes
(docs/design.md#keys-in-messages), with no row_key field.
`,
	setup: func(fs *flag.FlagSet) invocation {
		w := &watchArgs{fs: fs, state: "bttl_watch", poll: expiry.DefaultPollInterval}
		fs.StringVar(&w.state, "state", w.state, "keep the timer index and the stream's tokens in this `table`")
		fs.Var(shardFlag{&w.worker}, "worker", "be worker `I/N` of N sharing the table's partitions and timers (default 0/1)")
		fs.Var(timeFlag{&w.start}, "start", "read the stream from this `time` (RFC 3339, within its retention) on the first run (default now)")
		fs.DurationVar(&w.poll, "poll", w.poll, "look for due timers this often")
		fs.BoolVar(&w.gc, "gc", false, "also print GC deletions of managed cells with their lag")
		fs.BoolVar(&w.redact, "redact-keys", false, "print row keys as keyed hashes, not in clear")
		return invocation{check: w.check, checkSchemas: w.checkSchemas, run: w.run}
	},
}

type watchArgs struct {
	fs     *flag.FlagSet
	state  string
	worker scan.Shard
	start  time.Time
	poll   time.Duration
	gc     bool
	redact bool
	table  string
}

var stateTableID = regexp.MustCompile(`^[-_.a-zA-Z0-9]{1,50}$`)

func (w *watchArgs) check() error {
	if w.fs.NArg() != 1 {
		return errors.New("want TABLE")
	}
	w.table = w.fs.Arg(0)
	if w.worker.Count == 0 {
		w.worker = scan.Shard{Index: 0, Count: 1}
	}
	switch {
	case !stateTableID.MatchString(w.state):
		return fmt.Errorf("-state %q: want a table ID of 1 to 50 letters, digits, '-', '_' or '.' characters", w.state)
	case w.poll <= 0 || w.poll >= expiry.DefaultLease:
		return fmt.Errorf("-poll %v: want more than 0 and less than %v", w.poll, expiry.DefaultLease)
	}
	return nil
}

func (w *watchArgs) checkSchemas(schemas map[string]strategy.Schema) error {
	if _, ok := schemas[w.table]; !ok {
		return fmt.Errorf("table %q is not in the schema file", w.table)
	}
	return nil
}

// dialData connects to the data API as the data client does, for the
// change-stream calls the client does not wrap.
func (w *watchArgs) dialData(ctx context.Context, e *env) (*grpc.ClientConn, error) {
	if a := os.Getenv("BIGTABLE_EMULATOR_HOST"); a != "" {
		return grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	opts, err := e.g.clientOptions(true)
	if err != nil {
		return nil, err
	}
	return gtransport.Dial(ctx, append([]option.ClientOption{
		option.WithEndpoint("bigtable.googleapis.com:443"), option.WithScopes(bigtable.Scope)}, opts...)...)
}

// ensureState creates the -state table with its families when missing.
func (w *watchArgs) ensureState(ctx context.Context, e *env) error {
	fams := map[string]bigtable.Family{}
	for _, f := range []string{expiry.TimerFamily, expiry.LeaseFamily, expiry.ExpiredFamily, watchStreamFamily} {
		fams[f] = bigtable.Family{GCPolicy: bigtable.NoGcPolicy()}
	}
	err := e.adminClient.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: w.state, ColumnFamilies: fams})
	if status.Code(err) == codes.AlreadyExists {
		info, err := e.adminClient.TableInfo(ctx, w.state)
		if err != nil {
			return err
		}
		have := map[string]bool{}
		for _, f := range info.FamilyInfos {
			have[f.Name] = true
		}
		for f := range fams {
			if !have[f] {
				return fmt.Errorf("-state table %q has no family %q (it needs %q, %q, %q and %q)", w.state, f, expiry.TimerFamily, expiry.LeaseFamily, expiry.ExpiredFamily, watchStreamFamily)
			}
		}
		return nil
	}
	return err
}

func (w *watchArgs) run(e *env) int {
	schema := e.schemas[w.table]
	sctx, cancel := e.step()
	err := w.ensureState(sctx, e)
	cancel()
	if err != nil {
		return e.fail(fmt.Errorf("-state table %q: %w", w.state, err))
	}
	conn, err := w.dialData(e.ctx, e)
	if err != nil {
		return e.fail(err)
	}
	defer conn.Close()

	var mu sync.Mutex
	out := json.NewEncoder(e.stdout)
	write := func(v any) error {
		mu.Lock()
		defer mu.Unlock()
		return out.Encode(v)
	}
	keys := keytext.Text{}
	var opts []expiry.Option
	if w.redact {
		keys = keytext.Redact(nil)
		opts = append(opts, expiry.WithKeyRedaction(nil))
	}
	store := changestream.NewBigtableStore(e.data.Open(w.state), watchStreamFamily, w.table+"#stream/")
	opts = append(opts, expiry.WithIndexPrefix(w.table+"#expiry/"), expiry.WithPollInterval(w.poll),
		expiry.WithWorker(w.worker.Index, w.worker.Count), expiry.WithOwner(fmt.Sprintf("watch-%d", w.worker.Index)))
	nt, err := expiry.New(e.data, w.table, schema, w.state, store, func(ctx context.Context, ev expiry.Event) error {
		return write(ev)
	}, opts...)
	if err != nil {
		return e.fail(err)
	}
	handlers := []changestream.Handler{nt.Handle}
	if w.gc {
		rec, err := gclag.New(w.table, schema, gclag.WithJSONLines(gcLines{write: write, keys: keys}))
		if err != nil {
			return e.fail(err)
		}
		handlers = append(handlers, rec.Handle)
	}
	copts := []changestream.Option{changestream.WithWorker(w.worker.Index, w.worker.Count)}
	if !w.start.IsZero() {
		copts = append(copts, changestream.WithStartTime(w.start))
	}
	if e.g.appProfile != "" {
		copts = append(copts, changestream.WithAppProfile(e.g.appProfile))
	}
	c, err := changestream.NewConsumer(conn, e.g.project, e.g.instance, w.table, store, copts...)
	if err != nil {
		return e.fail(err)
	}
	ctx, stop := context.WithCancel(e.ctx)
	defer stop()
	errs := make(chan error, 2)
	go func() {
		errs <- c.Run(ctx, func(ctx context.Context, ch changestream.Change) error {
			for _, h := range handlers {
				if err := h(ctx, ch); err != nil {
					return err
				}
			}
			return nil
		})
	}()
	go func() { errs <- nt.Run(ctx) }()
	err = <-errs
	stop()
	if err2 := <-errs; err == nil || errors.Is(err, context.Canceled) {
		err = err2
	}
	if errors.Is(context.Cause(e.ctx), errCommandTimeout) {
		// -timeout is how a watch is bounded: its end is not a failure.
		fmt.Fprintf(e.stderr, "bttl watch: stopped at -timeout %s\n", e.g.timeout)
		return exitOK
	}
	if err == nil || (errors.Is(err, context.Canceled) && !e.interrupted()) {
		return exitOK
	}
	return e.fail(err)
}

// gcLines writes the GC recorder's JSON lines as "gc" events, the row
// key shown as the command shows keys.
type gcLines struct {
	write func(any) error
	keys  keytext.Text
}

func (g gcLines) Write(p []byte) (int, error) {
	var m map[string]any
	if err := json.Unmarshal(p, &m); err != nil {
		return 0, err
	}
	var ev gclag.Event
	if err := json.Unmarshal(p, &struct {
		RowKey *[]byte `json:"row_key"`
	}{&ev.RowKey}); err != nil {
		return 0, err
	}
	m["event"] = "gc"
	m["key"] = g.keys.Key(string(ev.RowKey))
	if g.keys.Redacts() {
		delete(m, "row_key")
	}
	if err := g.write(m); err != nil {
		return 0, err
	}
	return len(p), nil
}

var _ io.Writer = gcLines{}

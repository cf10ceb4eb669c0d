package changestream

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// ChangeType says who made a change.
type ChangeType int

const (
	// User is "A user-initiated mutation" (DataChange.Type USER).
	User ChangeType = iota + 1
	// GarbageCollection is "A system-initiated mutation as part of garbage
	// collection" (DataChange.Type GARBAGE_COLLECTION).
	GarbageCollection
)

func (t ChangeType) String() string {
	switch t {
	case User:
		return "USER"
	case GarbageCollection:
		return "GARBAGE_COLLECTION"
	}
	return fmt.Sprintf("ChangeType(%d)", int(t))
}

// Change is one complete DataChange: its chunks joined, its chunked values
// reassembled.
type Change struct {
	// Table is the table's ID.
	Table     string
	Partition Partition
	Type      ChangeType
	// SourceCluster is "The cluster where the mutation was applied. Not set
	// when type is GARBAGE_COLLECTION."
	SourceCluster string
	RowKey        []byte
	// CommitTime is "The timestamp at which the mutation was applied on the
	// Bigtable server."
	CommitTime time.Time
	Tiebreaker int32
	Mutations  []*btpb.Mutation
	// LowWatermark is the server's estimate that later records commit no
	// earlier ("usually"; the doc allows exceptions).
	LowWatermark time.Time
}

// Handler processes a change. An error stops Run, which returns it; the
// change is then not recorded as processed and is delivered again by the
// next Run.
type Handler func(ctx context.Context, c Change) error

// Consumer reads a table's change stream: one reader per partition it
// holds a lease on, its tokens persisted in a Store.
type Consumer struct {
	client   btpb.BigtableClient
	endpoint string
	table    string // full resource name
	tableID  string
	store    Store
	cfg      config

	rngMu sync.Mutex
	rng   *rand.Rand

	wmMu       sync.Mutex
	watermarks map[string]time.Time
}

// NewConsumer returns a consumer of the change stream of table in
// project's instance, over conn (a connection to the Bigtable data API or
// an emulator). The table's change stream must be enabled.
func NewConsumer(conn *grpc.ClientConn, project, instance, table string, store Store, opts ...Option) (*Consumer, error) {
	cfg := defaults()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if conn == nil || store == nil || project == "" || instance == "" || table == "" {
		return nil, fmt.Errorf("%w: connection, store, project, instance and table are required", ErrInvalidOption)
	}
	return &Consumer{
		client:     btpb.NewBigtableClient(conn),
		endpoint:   conn.Target(),
		table:      fmt.Sprintf("projects/%s/instances/%s/tables/%s", project, instance, table),
		tableID:    table,
		store:      store,
		cfg:        cfg,
		rng:        rand.New(rand.NewPCG(cfg.seed, uint64(cfg.index))),
		watermarks: map[string]time.Time{},
	}, nil
}

// LowWatermark is the lowest watermark of the partitions this worker
// reads, zero before any: every change committed earlier has "usually"
// been delivered.
func (c *Consumer) LowWatermark() time.Time {
	c.wmMu.Lock()
	defer c.wmMu.Unlock()
	var low time.Time
	for _, w := range c.watermarks {
		if low.IsZero() || w.Before(low) {
			low = w
		}
	}
	return low
}

func (c *Consumer) setWatermark(p Partition, w time.Time) {
	c.wmMu.Lock()
	defer c.wmMu.Unlock()
	if w.IsZero() {
		delete(c.watermarks, p.Key())
		return
	}
	c.watermarks[p.Key()] = w
}

func (c *Consumer) errorf(op string, p *Partition, err error) error {
	return &Error{Op: op, Endpoint: c.endpoint, Table: c.table, Partition: p, Err: err}
}

// Run reads the partitions this worker holds or can claim, calling h for
// each change, until ctx is done (it returns ctx's error), every partition
// has ended (WithEndTime; it returns nil), or an error that retrying cannot
// cure: h's error, a call the server refuses for good, or WithMaxAttempts
// failures in a row. Delivery is at least once: each change is delivered
// to h until h returns nil for it and, after a restart, again if its token
// was not yet checkpointed (see WithCheckpointEvery).
func (c *Consumer) Run(ctx context.Context, h Handler) error {
	if err := c.init(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		key string
		err error
	}
	type running struct {
		cancel  context.CancelFunc
		expires *atomic.Int64
	}
	readers := map[string]running{}
	results := make(chan result)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	ticker := time.NewTicker(c.cfg.poll)
	defer ticker.Stop()
	failures := 0
	for {
		states, err := c.list(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if failures++; failures >= c.cfg.maxAttempts {
				return err
			}
		} else {
			failures = 0
		}
		allDone := err == nil && len(states) > 0
		for _, st := range states {
			if st.Done {
				continue
			}
			allDone = false
			key := st.Partition.Key()
			now := c.cfg.clock.Now()
			if r, ok := readers[key]; ok {
				// Renew once a third of the lease has passed: polls are
				// shorter than the lease, so it is renewed well before it
				// lapses, without a write per poll.
				if st.Lease.Owner == c.cfg.owner && st.Lease.Expires.Sub(now) > c.cfg.lease*2/3 {
					continue
				}
				next := Lease{Owner: c.cfg.owner, Expires: now.Add(c.cfg.lease)}
				ok, err := c.acquire(ctx, st, next)
				if err == nil && !ok {
					r.cancel()
				} else if ok {
					r.expires.Store(next.Expires.UnixMilli())
				}
				continue
			}
			if !st.Ready() || !c.mayClaim(st, now) {
				continue
			}
			next := Lease{Owner: c.cfg.owner, Expires: now.Add(c.cfg.lease)}
			if ok, err := c.acquire(ctx, st, next); err != nil || !ok {
				continue
			}
			rctx, rcancel := context.WithCancel(ctx)
			exp := new(atomic.Int64)
			exp.Store(next.Expires.UnixMilli())
			readers[key] = running{cancel: rcancel, expires: exp}
			wg.Add(1)
			go func(st State) {
				defer wg.Done()
				err := c.read(rctx, st, h, exp)
				rcancel()
				c.setWatermark(st.Partition, time.Time{})
				select {
				case results <- result{key, err}:
				case <-ctx.Done():
				}
			}(st)
		}
		if allDone && len(readers) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-results:
			delete(readers, r.key)
			if r.err != nil && fatal(r.err) {
				return r.err
			}
		case <-ticker.C:
		}
	}
}

// fatal reports an error retrying cannot cure. A lost lease, a store or a
// transient stream failure only ends the reader: the partition is claimed
// again from its persisted token.
func fatal(err error) bool {
	var he *handlerError
	var pe *permanentError
	if errors.As(err, &he) || errors.As(err, &pe) || errors.Is(err, ErrProtocol) || errors.Is(err, errGaveUp) {
		return true
	}
	return false
}

var errGaveUp = errors.New("changestream: gave up after repeated failures")

// permanentError marks a stream error retrying cannot cure.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

type handlerError struct{ err error }

func (e *handlerError) Error() string { return "changestream: handler: " + e.err.Error() }
func (e *handlerError) Unwrap() error { return e.err }

func (c *Consumer) mayClaim(st State, now time.Time) bool {
	switch {
	case st.Lease.Owner == c.cfg.owner:
		return true
	case st.Lease.Owner == "" && c.preferred(st.Partition):
		return true
	}
	return !now.Before(st.Lease.Expires)
}

func (c *Consumer) preferred(p Partition) bool {
	h := fnv.New32a()
	h.Write([]byte(p.Key()))
	return int(h.Sum32()%uint32(c.cfg.count)) == c.cfg.index
}

func (c *Consumer) list(ctx context.Context) ([]State, error) {
	sctx, cancel := context.WithTimeout(ctx, c.cfg.rpcTimeout)
	defer cancel()
	_, states, err := c.store.List(sctx)
	if err != nil {
		return nil, c.errorf("store list", nil, err)
	}
	return states, nil
}

func (c *Consumer) acquire(ctx context.Context, st State, next Lease) (bool, error) {
	sctx, cancel := context.WithTimeout(ctx, c.cfg.rpcTimeout)
	defer cancel()
	return c.store.Acquire(sctx, st.Partition, st.Lease, next)
}

// init records the initial partitions (task 0) or waits for them.
func (c *Consumer) init(ctx context.Context) error {
	deadline := time.Now().Add(c.cfg.initWait)
	for {
		sctx, cancel := context.WithTimeout(ctx, c.cfg.rpcTimeout)
		ok, _, err := c.store.List(sctx)
		cancel()
		if err != nil {
			return c.errorf("store list", nil, err)
		}
		if ok {
			return nil
		}
		if c.cfg.index == 0 {
			break
		}
		if time.Now().After(deadline) {
			return c.errorf("wait for initial partitions", nil, ErrNotInitialized)
		}
		t := time.NewTimer(c.cfg.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	parts, err := c.initialPartitions(ctx)
	if err != nil {
		return err
	}
	now := c.cfg.clock.Now()
	start := c.cfg.start
	if start.IsZero() {
		start = now
	}
	sctx, cancel := context.WithTimeout(ctx, c.cfg.rpcTimeout)
	defer cancel()
	if err := c.store.Init(sctx, start, parts, Lease{Expires: now.Add(c.cfg.lease)}); err != nil {
		return c.errorf("store init", nil, err)
	}
	return nil
}

func (c *Consumer) initialPartitions(ctx context.Context) ([]Partition, error) {
	var lastErr error
	for attempt := 0; attempt < c.cfg.maxAttempts; attempt++ {
		parts, err := c.generate(ctx)
		if err == nil {
			return parts, nil
		}
		lastErr = err
		if !retryable(err) || ctx.Err() != nil {
			break
		}
		if err := c.sleep(ctx, attempt); err != nil {
			return nil, err
		}
	}
	return nil, c.errorf("GenerateInitialChangeStreamPartitions", nil, lastErr)
}

func (c *Consumer) generate(ctx context.Context) ([]Partition, error) {
	// The whole listing is one bounded wait.
	ctx, cancel := context.WithTimeout(ctx, c.cfg.rpcTimeout)
	defer cancel()
	stream, err := c.client.GenerateInitialChangeStreamPartitions(ctx, &btpb.GenerateInitialChangeStreamPartitionsRequest{
		TableName: c.table, AppProfileId: c.cfg.appProfile,
	})
	if err != nil {
		return nil, err
	}
	var parts []Partition
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		p, err := partitionOf(resp.GetPartition())
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	// "The union of partitions will cover the entire keyspace."
	var toks []Token
	for _, p := range parts {
		toks = append(toks, Token{Partition: p})
	}
	if !covers(Partition{}, toks) {
		return nil, fmt.Errorf("%w: initial partitions %v do not tile the keyspace", ErrProtocol, parts)
	}
	return parts, nil
}

// retryable reports a failure another attempt may cure.
func retryable(err error) bool {
	if errors.Is(err, ErrIdle) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.DeadlineExceeded, codes.Internal:
		return true
	}
	return false
}

// sleep waits the attempt's backoff: exponential from the minimum, capped,
// with full jitter in its upper half.
func (c *Consumer) sleep(ctx context.Context, attempt int) error {
	d := c.cfg.minBackoff
	for i := 0; i < attempt && d < c.cfg.maxBackoff; i++ {
		d *= 2
	}
	d = min(d, c.cfg.maxBackoff)
	c.rngMu.Lock()
	d = d/2 + time.Duration(c.rng.Int64N(int64(d/2)+1))
	c.rngMu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// read reads one partition until it closes, its lease is lost, or it fails.
func (c *Consumer) read(ctx context.Context, st State, h Handler, leaseExpires *atomic.Int64) error {
	p := st.Partition
	var pos *Token
	if st.Progress != nil {
		t := *st.Progress
		pos = &t
	}
	attempt := 0
	for {
		done, progressed, err := c.readOnce(ctx, st, &pos, h, leaseExpires)
		if done || err == nil {
			return err
		}
		if progressed {
			attempt = 0
		}
		if ctx.Err() != nil {
			return err
		}
		if !retryable(err) {
			// The server refuses the read for good (INVALID_ARGUMENT for a
			// bad token, NOT_FOUND, PERMISSION_DENIED, ...): claiming the
			// partition again would repeat it forever.
			return &permanentError{err}
		}
		if attempt++; attempt >= c.cfg.maxAttempts {
			return fmt.Errorf("%w: %w", errGaveUp, err)
		}
		if err := c.sleep(ctx, attempt-1); err != nil {
			return c.errorf("ReadChangeStream", &p, err)
		}
	}
}

// readOnce opens one stream from *pos (or the state's parents' tokens, or
// its start time) and reads it. done means the reader must stop, with err.
func (c *Consumer) readOnce(ctx context.Context, st State, pos **Token, h Handler, leaseExpires *atomic.Int64) (done, progressed bool, err error) {
	p := st.Partition
	req := &btpb.ReadChangeStreamRequest{
		TableName:         c.table,
		AppProfileId:      c.cfg.appProfile,
		Partition:         p.proto(),
		HeartbeatDuration: durationpb.New(c.cfg.heartbeat),
	}
	if !c.cfg.end.IsZero() {
		req.EndTime = timestamppb.New(c.cfg.end)
	}
	switch {
	case *pos != nil:
		req.StartFrom = &btpb.ReadChangeStreamRequest_ContinuationTokens{ContinuationTokens: &btpb.StreamContinuationTokens{
			Tokens: []*btpb.StreamContinuationToken{(*pos).proto()}}}
	case covers(p, st.Parents):
		var toks []*btpb.StreamContinuationToken
		for _, t := range st.Parents {
			toks = append(toks, t.proto())
		}
		req.StartFrom = &btpb.ReadChangeStreamRequest_ContinuationTokens{ContinuationTokens: &btpb.StreamContinuationTokens{Tokens: toks}}
	default:
		req.StartFrom = &btpb.ReadChangeStreamRequest_StartTime{StartTime: timestamppb.New(st.StartTime)}
	}
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	var idled atomic.Bool
	// Every wait on the stream is bounded: opening it, and each message.
	idle := time.AfterFunc(c.cfg.idle, func() { idled.Store(true); scancel() })
	defer idle.Stop()
	stream, err := c.client.ReadChangeStream(sctx, req)
	if err != nil {
		return false, false, c.streamErr(ctx, p, &idled, err)
	}
	var cur *Change
	sinceCheckpoint := 0
	for {
		resp, err := stream.Recv()
		if err != nil {
			if err == io.EOF {
				// A stream ends with CloseStream; a bare end is a broken one.
				err = io.ErrUnexpectedEOF
			}
			return false, progressed, c.streamErr(ctx, p, &idled, err)
		}
		idle.Reset(c.cfg.idle)
		switch rec := resp.StreamRecord.(type) {
		case *btpb.ReadChangeStreamResponse_DataChange_:
			dc := rec.DataChange
			var err error
			if cur, err = c.assemble(p, cur, dc); err != nil {
				return true, progressed, c.errorf("ReadChangeStream", &p, err)
			}
			if !dc.GetDone() {
				continue
			}
			if c.cfg.clock.Now().UnixMilli() >= leaseExpires.Load() {
				return true, progressed, c.errorf("ReadChangeStream", &p, ErrLeaseLost)
			}
			cur.LowWatermark = dc.GetEstimatedLowWatermark().AsTime()
			if err := h(ctx, *cur); err != nil {
				return true, progressed, c.errorf("handler", &p, &handlerError{err})
			}
			cur = nil
			progressed = true
			*pos = &Token{Partition: p, Token: dc.GetToken()}
			c.setWatermark(p, dc.GetEstimatedLowWatermark().AsTime())
			if sinceCheckpoint++; sinceCheckpoint >= c.cfg.checkpointEvery {
				sinceCheckpoint = 0
				if err := c.checkpoint(ctx, p, **pos, dc.GetEstimatedLowWatermark().AsTime()); err != nil {
					return true, progressed, err
				}
			}
		case *btpb.ReadChangeStreamResponse_Heartbeat_:
			hb := rec.Heartbeat
			if cur != nil {
				return true, progressed, c.errorf("ReadChangeStream", &p, fmt.Errorf("%w: heartbeat inside a chunked change", ErrProtocol))
			}
			progressed = true
			// "A token that can be provided to a subsequent ReadChangeStream
			// call to pick up reading at the current stream position."
			*pos = &Token{Partition: p, Token: hb.GetContinuationToken().GetToken()}
			wm := hb.GetEstimatedLowWatermark().AsTime()
			c.setWatermark(p, wm)
			sinceCheckpoint = 0
			if err := c.checkpoint(ctx, p, **pos, wm); err != nil {
				return true, progressed, err
			}
		case *btpb.ReadChangeStreamResponse_CloseStream_:
			return true, progressed, c.close(ctx, p, rec.CloseStream)
		default:
			return true, progressed, c.errorf("ReadChangeStream", &p, fmt.Errorf("%w: record %T", ErrProtocol, rec))
		}
	}
}

func (c *Consumer) streamErr(ctx context.Context, p Partition, idled *atomic.Bool, err error) error {
	if idled.Load() && ctx.Err() == nil {
		err = fmt.Errorf("%w (%v): %w", ErrIdle, c.cfg.idle, err)
	}
	return c.errorf("ReadChangeStream", &p, err)
}

// assemble joins a DataChange's messages: "Messages other than the first
// in a sequence will only have the type and chunks fields populated, with
// the final message in the sequence also containing done set to true";
// a chunked SetCell's later chunks carry only their value, to be
// concatenated (MutationChunk.mutation).
func (c *Consumer) assemble(p Partition, cur *Change, dc *btpb.ReadChangeStreamResponse_DataChange) (*Change, error) {
	if cur == nil {
		if dc.GetType() == btpb.ReadChangeStreamResponse_DataChange_CONTINUATION {
			return nil, fmt.Errorf("%w: CONTINUATION with no change begun", ErrProtocol)
		}
		cur = &Change{
			Table: c.tableID, Partition: p, SourceCluster: dc.GetSourceClusterId(),
			RowKey: dc.GetRowKey(), CommitTime: dc.GetCommitTimestamp().AsTime(), Tiebreaker: dc.GetTiebreaker(),
		}
		switch dc.GetType() {
		case btpb.ReadChangeStreamResponse_DataChange_USER:
			cur.Type = User
		case btpb.ReadChangeStreamResponse_DataChange_GARBAGE_COLLECTION:
			cur.Type = GarbageCollection
		default:
			return nil, fmt.Errorf("%w: change type %v", ErrProtocol, dc.GetType())
		}
	} else if dc.GetType() != btpb.ReadChangeStreamResponse_DataChange_CONTINUATION {
		return nil, fmt.Errorf("%w: %v inside a chunked change", ErrProtocol, dc.GetType())
	}
	for _, ch := range dc.GetChunks() {
		info := ch.GetChunkInfo()
		if info.GetChunkedValueOffset() > 0 {
			n := len(cur.Mutations)
			var last *btpb.Mutation_SetCell
			if n > 0 {
				last = cur.Mutations[n-1].GetSetCell()
			}
			if last == nil || int(info.GetChunkedValueOffset()) != len(last.Value) {
				return nil, fmt.Errorf("%w: value chunk at offset %d does not follow its SetCell", ErrProtocol, info.GetChunkedValueOffset())
			}
			last.Value = append(last.Value, ch.GetMutation().GetSetCell().GetValue()...)
			continue
		}
		m := ch.GetMutation()
		if sc := m.GetSetCell(); sc != nil && info != nil {
			// Own the value: later chunks are appended to it.
			cp := proto.Clone(sc).(*btpb.Mutation_SetCell)
			cp.Value = append(make([]byte, 0, info.GetChunkedValueSize()), sc.Value...)
			m = &btpb.Mutation{Mutation: &btpb.Mutation_SetCell_{SetCell: cp}}
		}
		cur.Mutations = append(cur.Mutations, m)
	}
	return cur, nil
}

func (c *Consumer) checkpoint(ctx context.Context, p Partition, tok Token, wm time.Time) error {
	sctx, cancel := context.WithTimeout(ctx, c.cfg.rpcTimeout)
	defer cancel()
	if err := c.store.Checkpoint(sctx, p, c.cfg.owner, tok, wm); err != nil {
		return c.errorf("store checkpoint", &p, err)
	}
	return nil
}

// close handles CloseStream: "If status is OK and continuation_tokens &
// new_partitions are empty, the stream has finished ... If present, then a
// change in partitioning requires the client to open a new stream for each
// token to resume reading." Each new partition gets the tokens whose
// partitions lie within it: a split child one, a merged child one per
// parent, and it starts once they cover it.
func (c *Consumer) close(ctx context.Context, p Partition, cs *btpb.ReadChangeStreamResponse_CloseStream) error {
	if len(cs.GetContinuationTokens()) == 0 && len(cs.GetNewPartitions()) == 0 {
		if code := codes.Code(cs.GetStatus().GetCode()); code != codes.OK {
			return c.errorf("ReadChangeStream", &p, status.ErrorProto(cs.GetStatus()))
		}
		return c.closeStore(ctx, p, nil)
	}
	var toks []Token
	for _, t := range cs.GetContinuationTokens() {
		tp, err := partitionOf(t.GetPartition())
		if err != nil {
			return c.errorf("ReadChangeStream", &p, err)
		}
		toks = append(toks, Token{Partition: tp, Token: t.GetToken()})
	}
	lease := Lease{Expires: c.cfg.clock.Now().Add(c.cfg.lease)}
	var children []Child
	for _, np := range cs.GetNewPartitions() {
		child, err := partitionOf(np)
		if err != nil {
			return c.errorf("ReadChangeStream", &p, err)
		}
		ch := Child{Partition: child, Lease: lease}
		for _, t := range toks {
			if child.contains(t.Partition) {
				ch.Tokens = append(ch.Tokens, t)
			}
		}
		if len(ch.Tokens) == 0 {
			return c.errorf("ReadChangeStream", &p, fmt.Errorf("%w: new partition %v has no token", ErrProtocol, child))
		}
		children = append(children, ch)
	}
	return c.closeStore(ctx, p, children)
}

func (c *Consumer) closeStore(ctx context.Context, p Partition, children []Child) error {
	sctx, cancel := context.WithTimeout(ctx, c.cfg.rpcTimeout)
	defer cancel()
	if err := c.store.Close(sctx, p, c.cfg.owner, children); err != nil {
		return c.errorf("store close", &p, err)
	}
	return nil
}

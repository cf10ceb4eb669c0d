package changestreams

import (
	"context"
	"io"
	"time"

	btapb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

type dataServer struct {
	btpb.UnimplementedBigtableServer
	s *Server
}

// resolve copies muts with every server-side timestamp replaced by the
// commit time in milliseconds ("Use -1 for current Bigtable server time",
// Mutation.SetCell.timestamp_micros), so the record says what was stored.
func resolve(muts []*btpb.Mutation, commit time.Time) []*btpb.Mutation {
	out := make([]*btpb.Mutation, len(muts))
	for i, m := range muts {
		m = proto.Clone(m).(*btpb.Mutation)
		if sc := m.GetSetCell(); sc != nil && sc.TimestampMicros == -1 {
			sc.TimestampMicros = commit.UnixMilli() * 1000
		}
		out[i] = m
	}
	return out
}

// ReadRows reads the backend's answer to its end while no write runs
// (bttest's reads race with writes to the same row: the torn read in
// docs/emulators.md#quirks), then sends it, so a client writing from its
// read callback cannot block on the lock.
func (d *dataServer) ReadRows(req *btpb.ReadRowsRequest, stream btpb.Bigtable_ReadRowsServer) error {
	var resps []*btpb.ReadRowsResponse
	err := func() error {
		d.s.mu.Lock()
		defer d.s.mu.Unlock()
		up, err := d.s.data.ReadRows(stream.Context(), req)
		if err != nil {
			return err
		}
		for {
			resp, err := up.Recv()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			resps = append(resps, resp)
		}
	}()
	if err != nil {
		return err
	}
	for _, resp := range resps {
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
	return nil
}

// SampleRowKeys is forwarded as it is (scans split the table with it).
func (d *dataServer) SampleRowKeys(req *btpb.SampleRowKeysRequest, stream btpb.Bigtable_SampleRowKeysServer) error {
	up, err := d.s.data.SampleRowKeys(stream.Context(), req)
	if err != nil {
		return err
	}
	for {
		resp, err := up.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func (d *dataServer) MutateRow(ctx context.Context, req *btpb.MutateRowRequest) (*btpb.MutateRowResponse, error) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	commit := s.clock.Now()
	req = proto.Clone(req).(*btpb.MutateRowRequest)
	req.Mutations = resolve(req.Mutations, commit)
	resp, err := s.data.MutateRow(ctx, req)
	if err != nil {
		return nil, err
	}
	s.appendLocked(s.tableLocked(req.TableName), req.RowKey, false, commit, req.Mutations)
	if err := s.dropIfEmptyLocked(ctx, req.TableName, req.RowKey, req.Mutations); err != nil {
		return nil, err
	}
	return resp, nil
}

// dropIfEmptyLocked removes key's row from the backend when a deletion
// among muts left it without cells. In Bigtable a row is its cells ("a
// row with no cells does not exist"); bttest keeps an emptied row in its
// tree until a GC pass of a table with a GC rule, so a table of short-lived
// rows (a timer index) would make every range read walk all the rows it
// ever held. The backend's only way to remove one row is DropRowRange by
// prefix, so it is used only when no row with key as prefix holds a cell:
// then it removes empty rows alone. s.mu is held, so no write races it.
func (s *Server) dropIfEmptyLocked(ctx context.Context, table string, key []byte, muts []*btpb.Mutation) error {
	deletes := false
	for _, m := range muts {
		deletes = deletes || m.GetDeleteFromColumn() != nil || m.GetDeleteFromFamily() != nil || m.GetDeleteFromRow() != nil
	}
	if !deletes {
		return nil
	}
	up, err := s.data.ReadRows(ctx, &btpb.ReadRowsRequest{
		TableName: table,
		Rows:      &btpb.RowSet{RowRanges: []*btpb.RowRange{prefixRange(key)}},
		Filter:    &btpb.RowFilter{Filter: &btpb.RowFilter_CellsPerRowLimitFilter{CellsPerRowLimitFilter: 1}},
		RowsLimit: 1,
	})
	if err != nil {
		return err
	}
	held := false
	for {
		resp, err := up.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		held = held || len(resp.Chunks) > 0
	}
	if held {
		return nil
	}
	_, err = s.admin.DropRowRange(ctx, &btapb.DropRowRangeRequest{Name: table, Target: &btapb.DropRowRangeRequest_RowKeyPrefix{RowKeyPrefix: key}})
	return err
}

// prefixRange is the rows whose keys start with key.
func prefixRange(key []byte) *btpb.RowRange {
	rr := &btpb.RowRange{StartKey: &btpb.RowRange_StartKeyClosed{StartKeyClosed: key}}
	end := append([]byte(nil), key...)
	for len(end) > 0 && end[len(end)-1] == 0xff {
		end = end[:len(end)-1]
	}
	if len(end) > 0 {
		end[len(end)-1]++
		rr.EndKey = &btpb.RowRange_EndKeyOpen{EndKeyOpen: end}
	}
	return rr
}

func (d *dataServer) MutateRows(req *btpb.MutateRowsRequest, stream btpb.Bigtable_MutateRowsServer) error {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	commit := s.clock.Now()
	req = proto.Clone(req).(*btpb.MutateRowsRequest)
	for _, e := range req.Entries {
		e.Mutations = resolve(e.Mutations, commit)
	}
	up, err := s.data.MutateRows(stream.Context(), req)
	if err != nil {
		return err
	}
	t := s.tableLocked(req.TableName)
	for {
		resp, err := up.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		// Only the entries the backend applied are changes.
		for _, e := range resp.Entries {
			if e.GetStatus().GetCode() == int32(codes.OK) && int(e.Index) < len(req.Entries) {
				en := req.Entries[e.Index]
				s.appendLocked(t, en.RowKey, false, commit, en.Mutations)
				if err := s.dropIfEmptyLocked(stream.Context(), req.TableName, en.RowKey, en.Mutations); err != nil {
					return err
				}
			}
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func (d *dataServer) CheckAndMutateRow(ctx context.Context, req *btpb.CheckAndMutateRowRequest) (*btpb.CheckAndMutateRowResponse, error) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	commit := s.clock.Now()
	req = proto.Clone(req).(*btpb.CheckAndMutateRowRequest)
	req.TrueMutations = resolve(req.TrueMutations, commit)
	req.FalseMutations = resolve(req.FalseMutations, commit)
	resp, err := s.data.CheckAndMutateRow(ctx, req)
	if err != nil {
		return nil, err
	}
	muts := req.FalseMutations
	if resp.PredicateMatched {
		muts = req.TrueMutations
	}
	if len(muts) > 0 {
		s.appendLocked(s.tableLocked(req.TableName), req.RowKey, false, commit, muts)
		if err := s.dropIfEmptyLocked(ctx, req.TableName, req.RowKey, muts); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// ReadModifyWriteRow is not modelled: its change would carry the cells the
// server computed, which the double does not derive.
func (d *dataServer) ReadModifyWriteRow(context.Context, *btpb.ReadModifyWriteRowRequest) (*btpb.ReadModifyWriteRowResponse, error) {
	return nil, status.Error(codes.Unimplemented, "changestreams: ReadModifyWriteRow is not modelled")
}

// GenerateInitialChangeStreamPartitions returns the open partitions: "the
// current list of partitions that make up the table's change stream. The
// union of partitions will cover the entire keyspace."
func (d *dataServer) GenerateInitialChangeStreamPartitions(req *btpb.GenerateInitialChangeStreamPartitionsRequest, stream btpb.Bigtable_GenerateInitialChangeStreamPartitionsServer) error {
	s := d.s
	s.mu.Lock()
	t := s.tableLocked(req.TableName)
	var parts []*btpb.StreamPartition
	for _, in := range t.open() {
		parts = append(parts, partitionPB(in.start, in.end))
		t.generated[in.start+"\x00"+in.end] = in
	}
	s.mu.Unlock()
	for _, p := range parts {
		if err := stream.Send(&btpb.GenerateInitialChangeStreamPartitionsResponse{Partition: p}); err != nil {
			return err
		}
	}
	return nil
}

// span is a sub-range of the read partition and the log position its
// stream resumes after.
type span struct {
	start, end string
	after      int64
}

// ReadChangeStream serves one partition's changes from the log. The rules,
// each from bigtable.proto / data.proto:
//
//   - a request starts from continuation tokens or a start time
//     (ReadChangeStreamRequest.start_from); "If a single token is provided,
//     the token's partition must exactly match the request's partition. If
//     multiple tokens are provided, as in the case of a partition merge, the
//     union of the token partitions must exactly cover the request's
//     partition. Otherwise, INVALID_ARGUMENT will be returned."
//   - a start time is inclusive (start_time: "This value is inclusive"), and
//     serves the range's history from that time;
//   - each change carries its commit timestamp, a token for the request's
//     partition ("This token is for the StreamPartition from the request")
//     and a low watermark (DataChange.token, estimated_low_watermark);
//   - heartbeats carry "A token that can be provided to a subsequent
//     ReadChangeStream call to pick up reading at the current stream
//     position" and a low watermark; they come every heartbeat_duration
//     ("Otherwise, defaults to 5 seconds") and once whenever the stream has
//     caught up;
//   - when the partition splits or merges, the stream ends with CloseStream
//     whose continuation_tokens' partitions are the parts of the old
//     partition within each new one and whose new_partitions are the new
//     partitions (the CloseStream example);
//   - with end_time, "OK will be returned when the stream advances beyond
//     this time": a CloseStream with status OK and no tokens.
func (d *dataServer) ReadChangeStream(req *btpb.ReadChangeStreamRequest, stream btpb.Bigtable_ReadChangeStreamServer) error {
	s := d.s
	start, end, err := rangeOf(req.GetPartition())
	if err != nil {
		return err
	}
	hb := DefaultHeartbeat
	if req.HeartbeatDuration != nil {
		hb = req.HeartbeatDuration.AsDuration()
		if hb <= 0 {
			return status.Errorf(codes.InvalidArgument, "heartbeat_duration %v", hb)
		}
	}
	var endTime time.Time
	if req.EndTime != nil {
		endTime = req.EndTime.AsTime()
	}
	s.mu.Lock()
	t := s.tableLocked(req.TableName)
	var in *inst
	var spans []span
	var from time.Time
	switch sf := req.StartFrom.(type) {
	case *btpb.ReadChangeStreamRequest_ContinuationTokens:
		in, spans, err = t.fromTokens(start, end, sf.ContinuationTokens.GetTokens())
	default:
		// A start time: the partition of exactly this range that
		// GenerateInitialChangeStreamPartitions last returned (else the
		// latest), so partitions listed together are read as they were
		// listed, however they split and merged since; it serves the range's
		// whole history from the time on ("Start reading the stream at the
		// specified timestamp"), from before the partition's creation too: a
		// consumer lists the current partitions and reads them from an
		// earlier start time.
		in = t.generated[start+"\x00"+end]
		for _, c := range t.insts {
			if t.generated[start+"\x00"+end] == nil && c.start == start && c.end == end {
				in = c
			}
		}
		if in == nil {
			err = status.Errorf(codes.InvalidArgument, "no partition [%q,%q)", start, end)
		} else {
			spans = []span{{start, end, 0}}
			from = req.GetStartTime().AsTime()
		}
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	ticker := time.NewTicker(hb)
	defer ticker.Stop()
	pos := spans[0].after
	for _, sp := range spans {
		pos = min(pos, sp.after)
	}
	beat := true
	for {
		s.mu.Lock()
		limit := int64(len(t.records))
		if in.closed >= 0 && in.closed < limit {
			limit = in.closed
		}
		recs := t.records[pos:limit]
		caughtUp := limit == int64(len(t.records))
		closed, children := in.closed, in.children
		changed, drop := t.changed, s.drop
		now := s.clock.Now()
		s.mu.Unlock()
		wm := now
		for _, r := range recs {
			wm = r.commit
			if !inRange(r.key, start, end) || r.commit.Before(from) || !after(spans, r) {
				continue
			}
			if !endTime.IsZero() && r.commit.After(endTime) {
				continue
			}
			if err := s.sendChange(stream, r, token(in.id, r.seq)); err != nil {
				return err
			}
			beat = true
		}
		pos = limit
		spans = nil // every sub-range is now at pos
		if caughtUp {
			wm = now
		}
		if closed >= 0 && pos >= closed {
			cs := &btpb.ReadChangeStreamResponse_CloseStream{Status: &spb.Status{}}
			for _, c := range children {
				cs.NewPartitions = append(cs.NewPartitions, partitionPB(c.start, c.end))
				ts, te := max(c.start, start), end
				if c.end != "" && (end == "" || c.end < end) {
					te = c.end
				}
				cs.ContinuationTokens = append(cs.ContinuationTokens, &btpb.StreamContinuationToken{
					Partition: partitionPB(ts, te), Token: token(c.id, closed),
				})
			}
			return stream.Send(&btpb.ReadChangeStreamResponse{StreamRecord: &btpb.ReadChangeStreamResponse_CloseStream_{CloseStream: cs}})
		}
		if !endTime.IsZero() && caughtUp && now.After(endTime) {
			return stream.Send(&btpb.ReadChangeStreamResponse{StreamRecord: &btpb.ReadChangeStreamResponse_CloseStream_{
				CloseStream: &btpb.ReadChangeStreamResponse_CloseStream{Status: &spb.Status{}}}})
		}
		if beat {
			beat = false
			if err := stream.Send(&btpb.ReadChangeStreamResponse{StreamRecord: &btpb.ReadChangeStreamResponse_Heartbeat_{
				Heartbeat: &btpb.ReadChangeStreamResponse_Heartbeat{
					ContinuationToken:     &btpb.StreamContinuationToken{Partition: partitionPB(start, end), Token: token(in.id, pos)},
					EstimatedLowWatermark: timestamppb.New(wm),
				}}}); err != nil {
				return err
			}
		}
		select {
		case <-stream.Context().Done():
			return stream.Context().Err()
		case <-drop:
			return status.Error(codes.Unavailable, "changestreams: connection dropped by the test")
		case <-ticker.C:
			beat = true
		case <-changed:
		}
	}
}

// after reports whether r lies past its sub-range's resume position.
func after(spans []span, r *record) bool {
	for _, sp := range spans {
		if inRange(r.key, sp.start, sp.end) {
			return r.seq > sp.after
		}
	}
	return true
}

// fromTokens validates tokens against the request's partition [start,
// end) and returns the incarnation they resume and their sub-ranges.
func (t *table) fromTokens(start, end string, toks []*btpb.StreamContinuationToken) (*inst, []span, error) {
	if len(toks) == 0 {
		return nil, nil, status.Error(codes.InvalidArgument, "no continuation tokens")
	}
	var id int
	var spans []span
	for i, tk := range toks {
		tid, seq, err := parseToken(tk.GetToken())
		if err != nil {
			return nil, nil, err
		}
		if i > 0 && tid != id {
			return nil, nil, status.Errorf(codes.InvalidArgument, "tokens of different partitions")
		}
		id = tid
		ts, te, err := rangeOf(tk.GetPartition())
		if err != nil {
			return nil, nil, err
		}
		spans = append(spans, span{ts, te, seq})
	}
	var in *inst
	for _, c := range t.insts {
		if c.id == id {
			in = c
		}
	}
	if in == nil || in.start != start || in.end != end {
		return nil, nil, status.Errorf(codes.InvalidArgument, "tokens are not for partition [%q,%q)", start, end)
	}
	// The union of the token partitions must exactly cover the request's.
	sorted := append([]span(nil), spans...)
	for i := range sorted {
		for j := i + 1; j < len(sorted); j++ {
			if sorted[j].start < sorted[i].start {
				sorted[i], sorted[j] = sorted[j], sorted[i]
			}
		}
	}
	at := start
	for i, sp := range sorted {
		if sp.start != at || (sp.end == "" && i != len(sorted)-1) {
			return nil, nil, status.Errorf(codes.InvalidArgument, "token partitions do not cover [%q,%q)", start, end)
		}
		at = sp.end
	}
	if at != end {
		return nil, nil, status.Errorf(codes.InvalidArgument, "token partitions do not cover [%q,%q)", start, end)
	}
	for _, sp := range spans {
		// A position before the incarnation's creation comes from a start
		// time read of its range's history.
		if sp.after < 0 || (in.closed >= 0 && sp.after > in.closed) {
			return nil, nil, status.Errorf(codes.InvalidArgument, "token position %d outside its partition's life", sp.after)
		}
	}
	return in, spans, nil
}

// sendChange sends r as one DataChange, or, with Config.ChunkBytes, as one
// message per MutationChunk: "Messages other than the first in a sequence
// will only have the type and chunks fields populated, with the final
// message in the sequence also containing done set to true"; "Only SetCell
// mutations can be chunked, and all chunks for a SetCell will be delivered
// contiguously" (MutationChunk.ChunkInfo).
func (s *Server) sendChange(stream btpb.Bigtable_ReadChangeStreamServer, r *record, tok string) error {
	typ := btpb.ReadChangeStreamResponse_DataChange_USER
	cluster := s.cfg.Cluster
	if r.gc {
		// "Not set when type is GARBAGE_COLLECTION." (source_cluster_id)
		typ, cluster = btpb.ReadChangeStreamResponse_DataChange_GARBAGE_COLLECTION, ""
	}
	var chunks []*btpb.ReadChangeStreamResponse_MutationChunk
	for _, m := range r.muts {
		sc := m.GetSetCell()
		if s.cfg.ChunkBytes <= 0 || sc == nil || len(sc.Value) <= s.cfg.ChunkBytes {
			chunks = append(chunks, &btpb.ReadChangeStreamResponse_MutationChunk{Mutation: m})
			continue
		}
		size := len(sc.Value)
		for off := 0; off < size; off += s.cfg.ChunkBytes {
			part := proto.Clone(sc).(*btpb.Mutation_SetCell)
			part.Value = sc.Value[off:min(size, off+s.cfg.ChunkBytes)]
			if off > 0 {
				// "ignore all fields except the SetCell's value"
				part = &btpb.Mutation_SetCell{Value: part.Value}
			}
			chunks = append(chunks, &btpb.ReadChangeStreamResponse_MutationChunk{
				ChunkInfo: &btpb.ReadChangeStreamResponse_MutationChunk_ChunkInfo{
					ChunkedValueSize: int32(size), ChunkedValueOffset: int32(off), LastChunk: off+s.cfg.ChunkBytes >= size,
				},
				Mutation: &btpb.Mutation{Mutation: &btpb.Mutation_SetCell_{SetCell: part}},
			})
		}
	}
	groups := [][]*btpb.ReadChangeStreamResponse_MutationChunk{chunks}
	if s.cfg.ChunkBytes > 0 && len(chunks) > 1 {
		groups = groups[:0]
		for _, c := range chunks {
			groups = append(groups, []*btpb.ReadChangeStreamResponse_MutationChunk{c})
		}
	}
	for i, g := range groups {
		dc := &btpb.ReadChangeStreamResponse_DataChange{Type: typ, Chunks: g}
		if i == 0 {
			dc.SourceClusterId = cluster
			dc.RowKey = r.key
			dc.CommitTimestamp = timestamppb.New(r.commit)
		} else {
			dc.Type = btpb.ReadChangeStreamResponse_DataChange_CONTINUATION
		}
		if i == len(groups)-1 {
			dc.Done = true
			dc.Token = tok
			dc.EstimatedLowWatermark = timestamppb.New(r.commit)
		}
		if err := stream.Send(&btpb.ReadChangeStreamResponse{StreamRecord: &btpb.ReadChangeStreamResponse_DataChange_{DataChange: dc}}); err != nil {
			return err
		}
	}
	return nil
}

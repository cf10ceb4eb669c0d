package provisionjob_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	provision "github.com/bttl/bttl/internal/provisionjob"
	"github.com/bttl/bttl/strategy"
)

// readRecorder records the ReadRows requests a client sends.
type readRecorder struct {
	mu   sync.Mutex
	reqs []*btpb.ReadRowsRequest
}

func (r *readRecorder) dialOption() grpc.DialOption {
	return grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil || !strings.HasSuffix(method, "/ReadRows") {
			return s, err
		}
		return &recordingStream{ClientStream: s, r: r}, nil
	})
}

func (r *readRecorder) take() []*btpb.ReadRowsRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reqs
	r.reqs = nil
	return out
}

type recordingStream struct {
	grpc.ClientStream
	r *readRecorder
}

func (s *recordingStream) SendMsg(m any) error {
	if req, ok := m.(*btpb.ReadRowsRequest); ok {
		s.r.mu.Lock()
		s.r.reqs = append(s.r.reqs, req)
		s.r.mu.Unlock()
	}
	return s.ClientStream.SendMsg(m)
}

// passes counts the reads of the whole table among reqs: a scan cuts a
// read into ranges (at random SampleRowKeys points on the emulators), and
// exactly one of them starts at the table's start.
func passes(reqs []*btpb.ReadRowsRequest) int {
	n := 0
	for _, q := range reqs {
		for _, rr := range q.GetRows().GetRowRanges() {
			if len(rr.GetStartKeyClosed()) == 0 && len(rr.GetStartKeyOpen()) == 0 {
				n++
			}
		}
	}
	return n
}

// familyFiltered counts the requests filtering by family.
func familyFiltered(reqs []*btpb.ReadRowsRequest) int {
	n := 0
	for _, q := range reqs {
		if strings.Contains(q.GetFilter().String(), "family_name_regex_filter") {
			n++
		}
	}
	return n
}

// Bttl plan read a lowered family twice (a sample for the count, then every
// row for the safety scan) and filtered by family even when it was the table's
// only one (the emulators compile the regular expression for every cell).
// PlanAndCheck reads it once, the count is exact, and the refusal comes from
// the same read; the family filter is sent only when the table has other
// families. On both servers (issue 27 item 6).
func TestPlanAndCheckReadsALoweredFamilyOnce(t *testing.T) {
	rec := &readRecorder{}
	cfg := bttestharness.Config{DialOptions: []grpc.DialOption{rec.dialOption()}, NoGC: true}
	bttestharness.OnBothServers(t, cfg, func(t *testing.T, h *bttestharness.Harness) {
		ctx := context.Background()
		require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "one", ColumnFamilies: map[string]bigtable.Family{
			"ev": {GCPolicy: bigtable.MaxAgePolicy(30 * 24 * time.Hour)},
		}}))
		require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "two", ColumnFamilies: map[string]bigtable.Family{
			"ev":    {GCPolicy: bigtable.MaxAgePolicy(30 * 24 * time.Hour)},
			"other": {},
		}}))
		old := bigtable.Time(h.Clock.Now().Add(-72 * time.Hour))
		for _, table := range []string{"one", "two"} {
			var keys []string
			var muts []*bigtable.Mutation
			for i := 0; i < 300; i++ {
				m := bigtable.NewMutation()
				m.Set("ev", "e", old, []byte("12345"))
				if table == "two" && i%2 == 0 {
					m.Set("other", "o", old, []byte("x"))
				}
				keys, muts = append(keys, fmt.Sprintf("r%04d", i)), append(muts, m)
			}
			// Rows of the other family only: not rows of the family.
			if table == "two" {
				m := bigtable.NewMutation()
				m.Set("other", "o", old, []byte("x"))
				keys, muts = append(keys, "s0000"), append(muts, m)
			}
			errs, err := h.Raw.Open(table).ApplyBulk(ctx, keys, muts)
			require.NoError(t, err)
			require.Nil(t, errs)
		}
		// 1s after an age rule of 48h over cells 72h old: a refusal
		// needs cells at or before now under one-second expiry.
		schema := strategy.Schema{"ev": strategy.OneSecond()}
		// WithSampleRows(20) sized Plan's sample before: the count read 20
		// of the 300 rows. It sizes only WithSampledSafetyScan's scan now.
		p := newProvisioner(h, &bytes.Buffer{}, provision.WithSampleRows(20))
		for _, table := range []string{"one", "two"} {
			rec.take()
			_, err := p.Plan(ctx, table, schema)
			require.NoError(t, err)
			require.Equal(t, 1, passes(rec.take()), "%s: Plan reads the lowered family once", table)

			plan, err := p.PlanAndCheck(ctx, table, schema)
			require.ErrorIs(t, err, provision.ErrRealTimestamps, table)
			require.NotNil(t, plan)
			reads := rec.take()
			assert.Equal(t, 1, passes(reads), "%s: PlanAndCheck reads the family once, as Plan alone does", table)
			var rt *provision.AdoptionError
			require.ErrorAs(t, err, &rt)
			assert.Equal(t, provision.ErrRealTimestamps, rt.Err, "the first finding is the one named")
			assert.True(t, rt.Exact)
			assert.Equal(t, int64(300), rt.Cells, table)
			im := plan.Changes[0].Impact
			require.NotNil(t, im)
			assert.Equal(t, int64(300), im.Collectable, "%s: an exact count, not a sample's", table)
			assert.Equal(t, int64(300), im.Rows, "%s: rows of the family only", table)
			if table == "one" {
				assert.Zero(t, familyFiltered(reads), "the table's only family: no family filter")
			} else {
				assert.Equal(t, len(reads), familyFiltered(reads), "another family: every read filters")
			}

			// CheckAdoptions reads again (at its own time).
			require.ErrorIs(t, p.CheckAdoptions(ctx, plan), provision.ErrRealTimestamps)
			assert.Equal(t, 1, passes(rec.take()))
		}
	})
}

// bttl verify needs Plan.Unchanged only: with WithoutImpact, Plan reads no
// row of a family whose rule a change lowers (before the count was exact
// it read a sample; a whole read would be wasted on verify).
func TestPlanWithoutImpactReadsNoData(t *testing.T) {
	rec := &readRecorder{}
	h, err := bttestharness.StartWithConfig(context.Background(), bttestharness.Config{DialOptions: []grpc.DialOption{rec.dialOption()}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	ctx := context.Background()
	require.NoError(t, h.Admin.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", ColumnFamilies: map[string]bigtable.Family{
		"ev": {GCPolicy: bigtable.MaxAgePolicy(30 * 24 * time.Hour)},
	}}))
	m := bigtable.NewMutation()
	m.Set("ev", "e", bigtable.Time(h.Clock.Now().Add(-72*time.Hour)), []byte("v"))
	require.NoError(t, h.Raw.Open("t").Apply(ctx, "r", m))
	rec.take()

	plan, err := newProvisioner(h, &bytes.Buffer{}, provision.WithoutImpact()).Plan(ctx, "t", strategy.Schema{"ev": strategy.DefaultExpiry(48 * time.Hour)})
	require.NoError(t, err)
	require.Len(t, plan.Changes, 1)
	assert.True(t, plan.Changes[0].Lowers)
	assert.Nil(t, plan.Changes[0].Impact)
	assert.Empty(t, rec.take(), "no ReadRows")
}

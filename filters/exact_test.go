package filters_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
)

// With the table's families known, the filter has no regex, and its shape
// is the simplest the schema allows.
func TestWithFamiliesShapes(t *testing.T) {
	now := bigtable.Timestamp(1_700_000_000_123_456)
	oneBound := bigtable.TimestampRangeFilterMicros(1_700_000_000_124_000, 0).String()
	defBound := bigtable.TimestampRangeFilterMicros(1_700_000_000_124_000-3_600_000_000, 0).String()
	cr := func(f string) string { return bigtable.ColumnRangeFilter(f, "", "").String() }
	cases := []struct {
		name     string
		schema   strategy.Schema
		families []string
		want     string
	}{
		{"one-second alone", strategy.Schema{"s": strategy.OneSecond()}, []string{"s"}, oneBound},
		{"default expiry alone", strategy.Schema{"d": strategy.DefaultExpiry(time.Hour)}, []string{"d"}, defBound},
		{"sequence alone", strategy.Schema{"q": strategy.Sequence(3)}, []string{"q"}, "col(*,3)"},
		{"age with max versions alone", strategy.Schema{"d": strategy.DefaultExpiry(time.Hour, strategy.WithMaxVersions(2))}, []string{"d"},
			"(" + defBound + " | col(*,2))"},
		{"two families, one rule", strategy.Schema{"a": strategy.OneSecond(), "b": strategy.OneSecond(strategy.WithDefaultTTL(time.Minute))},
			[]string{"a", "b"}, oneBound},
		{"the schema's families count as known", strategy.Schema{"q": strategy.Sequence(2)}, nil, "col(*,2)"},
		{"an unmanaged family", strategy.Schema{"s": strategy.OneSecond()}, []string{"s", "meta"},
			"((" + cr("s") + " | " + oneBound + ") + " + cr("meta") + ")"},
		{"a shared rule and an unmanaged family", strategy.Schema{"a": strategy.Sequence(3), "b": strategy.Sequence(3), "m": strategy.Unmanaged()},
			[]string{"a", "b", "m"}, "(((" + cr("a") + " + " + cr("b") + ") | col(*,3)) + " + cr("m") + ")"},
		{"four families", strategy.Schema{"one": strategy.OneSecond(), "def": strategy.DefaultExpiry(time.Hour), "seq": strategy.Sequence(3), "plain": strategy.Unmanaged()},
			[]string{"one", "def", "seq", "plain"},
			"((" + cr("def") + " | " + defBound + ") + (" + cr("one") + " | " + oneBound + ") + (" + cr("seq") + " | col(*,3)) + " + cr("plain") + ")"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := filters.New(c.schema, filters.WithFamilies(c.families))
			require.NoError(t, err)
			got := b.TTL(now).String()
			assert.Equal(t, c.want, got)
			assert.NotContains(t, got, "col(^", "no family regex")
		})
	}
}

// WithFamilies copies the names: the caller may reuse its slice.
func TestWithFamiliesCopiesNames(t *testing.T) {
	names := []string{"s", "meta"}
	b, err := filters.New(strategy.Schema{"s": strategy.Sequence(1)}, filters.WithFamilies(names))
	require.NoError(t, err)
	names[1] = "other"
	assert.Contains(t, b.TTL(0).String(), bigtable.ColumnRangeFilter("meta", "", "").String())
}

// The regex-free filter keeps exactly the cells a complete GC would keep,
// as the complement-regex filter does: random schemas over random families,
// random cells (several versions per column, timestamps around every bound),
// random read times, read through the in-process server with both filters
// and compared with a model of GC. A family created after the filter was
// built gets what WithFamilies documents: none of its cells, or, when one
// rule covers every known family, its cells under that rule; the
// complement-regex filter reads it untouched.
func TestWithFamiliesKeepsExactlyTheLiveCells(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	h, err := bttestharness.StartWithConfig(ctx, bttestharness.Config{NoGC: true})
	require.NoError(t, err)
	defer h.Close()

	policies := []strategy.Policy{
		strategy.OneSecond(), strategy.OneSecond(strategy.WithMaxVersions(2)),
		strategy.DefaultExpiry(time.Hour), strategy.DefaultExpiry(10 * time.Minute),
		strategy.DefaultExpiry(time.Hour, strategy.WithMaxVersions(1)),
		strategy.Sequence(1), strategy.Sequence(3), strategy.Unmanaged(),
	}
	names := []string{"a", "b", "c", "d", "e"}
	base := bigtable.Time(h.Clock.Now())
	base -= base % 1000
	lones := 0
	for round := 0; round < 30; round++ {
		table := fmt.Sprintf("t%d", round)
		// Every family is in the table; a random subset is in the schema,
		// and "late" is created after the filters are built.
		schema := strategy.Schema{}
		for _, n := range names {
			if rng.Intn(3) > 0 {
				schema[n] = policies[rng.Intn(len(policies))]
			}
		}
		// Every fourth round, one managed family alone: the filter is
		// its rule, which also filters "late".
		lone := round%4 == 0
		if len(schema) == 0 || lone {
			schema = strategy.Schema{"a": policies[rng.Intn(len(policies)-1)]}
		}
		require.NoError(t, h.Admin.CreateTable(ctx, table))
		var families []string
		for _, n := range names {
			if _, ok := schema[n]; ok || (!lone && rng.Intn(2) == 0) {
				require.NoError(t, h.Admin.CreateColumnFamily(ctx, table, n))
				families = append(families, n)
			}
		}
		exact, err := filters.New(schema, filters.WithFamilies(families))
		require.NoError(t, err)
		complement, err := filters.New(schema)
		require.NoError(t, err)
		require.NoError(t, h.Admin.CreateColumnFamily(ctx, table, "late"))
		all := append(append([]string(nil), families...), "late")

		raw := h.Raw.Open(table)
		for r := 0; r < 3; r++ {
			m := bigtable.NewMutation()
			for c := 0; c < 30; c++ {
				// Two hours either side of base, in ms; few columns, so
				// columns get several versions.
				ts := base + bigtable.Timestamp(rng.Int63n(4*3600_000)-2*3600_000)*1000
				m.Set(all[rng.Intn(len(all))], fmt.Sprintf("c%d", rng.Intn(6)), ts, []byte("v"))
			}
			require.NoError(t, raw.Apply(ctx, fmt.Sprintf("r%d", r), m))
		}
		stored := readAll(t, raw, nil)
		if !exact.Managed() {
			continue
		}
		// The single rule that covers every known family, if there is one.
		var alone *strategy.Policy
		if rules := distinctRules(schema, families); len(rules) == 1 {
			alone = &rules[0]
			lones++
		}
		for k := 0; k < 4; k++ {
			now := base + bigtable.Timestamp(rng.Int63n(3*3600_000_000)-3600_000_000)
			want := model(stored, func(fam string) (strategy.Policy, bool) {
				if fam == "late" {
					if alone != nil {
						return *alone, true
					}
					return strategy.Policy{}, false
				}
				return schema[fam], true
			}, now)
			assert.Equal(t, want, flatten(readAll(t, raw, exact.TTL(now))), "round %d: schema %v, families %v, now %d\nfilter %s", round, schema, families, now, exact.TTL(now))
			wantUntouched := model(stored, func(fam string) (strategy.Policy, bool) { return schema[fam], true }, now)
			assert.Equal(t, wantUntouched, flatten(readAll(t, raw, complement.TTL(now))), "round %d: complement form, schema %v, now %d", round, schema, now)
		}
	}
	assert.GreaterOrEqual(t, lones, 8, "rounds where one rule covers every family")
}

// distinctRules lists the distinct read rules of the known families (an
// unmanaged or unnamed family counts as the zero policy).
func distinctRules(schema strategy.Schema, families []string) []strategy.Policy {
	var out []strategy.Policy
	seen := map[string]bool{}
	add := func(p strategy.Policy) {
		key := fmt.Sprintf("%v/%d", p.Kind(), p.Versions())
		if p.Kind() == strategy.KindDefaultExpiry {
			key += "/" + p.DefaultTTL().String()
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, p)
		}
	}
	for _, p := range schema {
		add(p)
	}
	for _, f := range families {
		add(schema[f])
	}
	return out
}

// model is what a complete GC by each family's policy keeps of stored, at
// now: policy returns a family's policy, or false for a family whose cells
// are all hidden.
func model(stored map[string][]string, policy func(fam string) (strategy.Policy, bool), now bigtable.Timestamp) []string {
	var out []string
	for key, versions := range stored { // key row/fam:col, versions newest first as "ts"
		fam := strings.SplitN(strings.SplitN(key, "/", 2)[1], ":", 2)[0]
		p, visible := policy(fam)
		if !visible {
			continue
		}
		kept := 0
		for _, v := range versions {
			var ts int64
			fmt.Sscan(v, &ts)
			if p.Managed() && p.Kind() != strategy.KindSequence && !p.IsLive(bigtable.Timestamp(ts), now) {
				continue
			}
			if p.Versions() > 0 && kept >= p.Versions() {
				break
			}
			kept++
			out = append(out, key+"@"+v)
		}
	}
	sort.Strings(out)
	return out
}

// readAll reads every row through f (nil: unfiltered), as row/fam:col ->
// timestamps, newest first.
func readAll(t *testing.T, tbl *bigtable.Table, f bigtable.Filter) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	var opts []bigtable.ReadOption
	if f != nil {
		opts = append(opts, bigtable.RowFilter(f))
	}
	err := tbl.ReadRows(context.Background(), bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
		for _, items := range r {
			for _, it := range items {
				key := r.Key() + "/" + it.Column
				out[key] = append(out[key], fmt.Sprint(int64(it.Timestamp)))
			}
		}
		return true
	}, opts...)
	require.NoError(t, err)
	return out
}

func flatten(cells map[string][]string) []string {
	var out []string
	for key, versions := range cells {
		for _, v := range versions {
			out = append(out, key+"@"+v)
		}
	}
	sort.Strings(out)
	return out
}

// TTLProto of a Builder WithFamilies is exactly the proto the client sends
// for its TTL filter, for random schemas, families and read times.
func TestWithFamiliesTTLProtoIsWhatTheClientSends(t *testing.T) {
	t.Setenv("BIGTABLE_EMULATOR_HOST", "") // dial options are ignored under it
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	h, err := bttestharness.StartWithConfig(ctx, bttestharness.Config{})
	require.NoError(t, err)
	defer h.Close()
	var mu sync.Mutex
	var sent *btpb.RowFilter
	capture := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		return &recordingStream{ClientStream: cs, record: func(f *btpb.RowFilter) { mu.Lock(); sent = f; mu.Unlock() }}, err
	}
	c, err := bigtable.NewClientWithConfig(ctx, bttestharness.Project, bttestharness.Instance,
		bigtable.ClientConfig{MetricsProvider: bigtable.NoopMetricsProvider{}, DisableSession: true},
		option.WithEndpoint(h.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithGRPCDialOption(grpc.WithStreamInterceptor(capture)))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, h.Admin.CreateTable(ctx, "t"))
	tbl := c.Open("t")

	policies := []strategy.Policy{
		strategy.OneSecond(), strategy.OneSecond(strategy.WithMaxVersions(2)),
		strategy.DefaultExpiry(time.Hour), strategy.DefaultExpiry(1500*time.Millisecond, strategy.WithMaxVersions(1)),
		strategy.Sequence(3), strategy.Unmanaged(),
		strategy.OneSecond(strategy.WithWriteTime()), strategy.DefaultExpiry(time.Hour, strategy.WithWriteTime()),
	}
	names := []string{"a", "b.c", "b", "x-y", "_z"}
	checked := 0
	for i := 0; i < 60; i++ {
		schema := strategy.Schema{}
		var families []string
		for _, n := range names {
			switch rng.Intn(3) {
			case 0:
				schema[n] = policies[rng.Intn(len(policies))]
			case 1:
				families = append(families, n)
			}
		}
		b, err := filters.New(schema, filters.WithFamilies(families))
		require.NoError(t, err)
		now := bigtable.Timestamp(rng.Int63n(4_000_000_000_000_000))
		want := b.TTLProto(now)
		if !b.Managed() {
			assert.Nil(t, want)
			continue
		}
		require.NoError(t, tbl.ReadRows(ctx, bigtable.RowList{"r"}, func(bigtable.Row) bool { return true }, bigtable.RowFilter(b.TTL(now))))
		mu.Lock()
		got := sent
		mu.Unlock()
		assert.True(t, proto.Equal(got, want), "schema %v families %v now %d:\n sent %v\n TTLProto %v", schema, families, now, got, want)
		assert.Equal(t, proto.Size(got), b.Size(now))
		checked++
	}
	assert.Positive(t, checked)
}

// The filter's size is checked against the largest Bigtable serves. With
// 100 managed families of 20-byte names (Bigtable's limit on families per
// table), the complement regex alone is over it; the same schema with its
// families known is a fraction of it.
func TestCheckSize(t *testing.T) {
	schema := strategy.Schema{}
	var names []string
	letters := rand.New(rand.NewSource(1)) // fixed: the same names every run
	for i := 0; i < 100; i++ {
		var sb strings.Builder
		for sb.Len() < 20 {
			sb.WriteByte(byte('a' + letters.Intn(26)))
		}
		n := sb.String()
		names = append(names, n)
		schema[n] = strategy.DefaultExpiry(time.Duration(i+1) * time.Hour)
	}
	b, err := filters.New(schema)
	require.NoError(t, err)
	err = b.CheckSize()
	require.Error(t, err)
	assert.True(t, errors.Is(err, filters.ErrFilterTooLarge))
	var se *filters.SizeError
	require.True(t, errors.As(err, &se))
	assert.Equal(t, filters.MaxFilterBytes, se.Limit)
	assert.Greater(t, se.Bytes, filters.MaxFilterBytes)
	assert.False(t, se.FamiliesKnown)
	assert.Contains(t, err.Error(), "complement regex")
	t.Logf("100 families of 20 bytes: %d bytes without the families, %s", se.Bytes, err)

	known, err := filters.New(schema, filters.WithFamilies(names))
	require.NoError(t, err)
	require.NoError(t, known.CheckSize())
	size := known.Size(bigtable.Now())
	assert.Less(t, size, filters.MaxFilterBytes/2)
	t.Logf("the same with the families known: %d bytes", size)

	// 50 families fit either way.
	small := strategy.Schema{}
	for _, n := range names[:50] {
		small[n] = schema[n]
	}
	b, err = filters.New(small)
	require.NoError(t, err)
	assert.NoError(t, b.CheckSize())

	plain, err := filters.New(strategy.Schema{"m": strategy.Unmanaged()})
	require.NoError(t, err)
	assert.Zero(t, plain.Size(bigtable.Now()))
	assert.NoError(t, plain.CheckSize())
}

// Reads in one millisecond share the filter; a new millisecond costs one
// array, a range and a chain per age rule, the interleave and the cache
// entry.
func TestWithFamiliesAllocs(t *testing.T) {
	schema := strategy.Schema{"one": strategy.OneSecond(), "def": strategy.DefaultExpiry(time.Hour), "seq": strategy.Sequence(3), "plain": strategy.Unmanaged()}
	b, err := filters.New(schema, filters.WithFamilies([]string{"one", "def", "seq", "plain"}))
	require.NoError(t, err)
	now := bigtable.Timestamp(1_700_000_000_000_000)
	var sink bigtable.Filter
	same := testing.AllocsPerRun(100, func() { sink = b.TTL(now) })
	assert.Zero(t, same)
	moving := testing.AllocsPerRun(100, func() { now += 1000; sink = b.TTL(now) })
	assert.LessOrEqual(t, moving, 3.0+2*2, "2 age rules")
	_ = sink

	alone, err := filters.New(strategy.Schema{"s": strategy.OneSecond()}, filters.WithFamilies([]string{"s"}))
	require.NoError(t, err)
	moving = testing.AllocsPerRun(100, func() { now += 1000; sink = alone.TTL(now) })
	assert.LessOrEqual(t, moving, 3.0, "the bare rule: its range, the array, the cache entry")
}

// Past the largest timestamp no cell of a one-second family passes (a bare
// one-second rule blocks everything), and the other families keep their rules
// (issue 14, finding 10(b), for the regex-free filter).
func TestWithFamiliesPastMaxTimestamp(t *testing.T) {
	ctx := context.Background()
	h := bttestharness.New(t)
	for name, schema := range map[string]strategy.Schema{
		"mixed":           {"one": strategy.OneSecond(), "def": strategy.DefaultExpiry(time.Hour), "seq": strategy.Sequence(2), "plain": strategy.Unmanaged()},
		"one-second only": {"one": strategy.OneSecond()},
		"two one-second":  {"one": strategy.OneSecond(), "two": strategy.OneSecond()},
	} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, h.CreateTable(ctx, "t", schema))
			tbl := h.Raw.Open("t")
			m := bigtable.NewMutation()
			var families, live []string
			for fam, p := range schema {
				m.Set(fam, "c", strategy.MaxTimestamp, []byte("v"))
				families = append(families, fam)
				if p.Kind() != strategy.KindOneSecond {
					live = append(live, fam)
				}
			}
			require.NoError(t, tbl.Apply(ctx, "r", m))
			sort.Strings(families)
			sort.Strings(live)
			b, err := filters.New(schema, filters.WithFamilies(families))
			require.NoError(t, err)
			read := func(f bigtable.Filter) []string {
				var fams []string
				require.NoError(t, tbl.ReadRows(ctx, bigtable.RowList{"r"}, func(r bigtable.Row) bool {
					for fam := range r {
						fams = append(fams, fam)
					}
					return true
				}, bigtable.RowFilter(f)))
				sort.Strings(fams)
				return fams
			}
			assert.Equal(t, families, read(b.TTL(strategy.MaxTimestamp-1)), "just before: all live")
			for _, now := range []bigtable.Timestamp{strategy.MaxTimestamp, 1<<63 - 1} {
				assert.Equal(t, live, read(b.TTL(now)), "TTL at %d: %s", now, b.TTL(now))
				assert.NotNil(t, b.TTLProto(now))
			}
		})
	}
}

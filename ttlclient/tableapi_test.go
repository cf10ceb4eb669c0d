package ttlclient_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// rawGuardCase is a guardrail row written as a plain-client program writes
// it: a *bigtable.Mutation, with no cell options.
type rawGuardCase struct {
	name   string
	want   error
	family string
	row    string // default "row"; "-" is the empty key
	clock  time.Time
	build  func(m *bigtable.Mutation)
}

// rawGuardCases are the rows of guardCases a *bigtable.Mutation can
// express; the TTL and sequence rows, which need a cell option, are
// TestTableAPITimestampGuardrails.
func rawGuardCases() []rawGuardCase {
	set := func(fam string, ts bigtable.Timestamp) func(*bigtable.Mutation) {
		return func(m *bigtable.Mutation) { m.Set(fam, "c", ts, []byte("v")) }
	}
	return []rawGuardCase{
		{name: "server timestamp on one-second family", want: strategy.ErrServerTimestamp, family: famOne, build: set(famOne, bigtable.ServerTime)},
		{name: "server timestamp on sequence family", want: strategy.ErrServerTimestamp, family: famSeq, build: set(famSeq, bigtable.ServerTime)},
		{name: "real timestamp on one-second family", want: strategy.ErrAlreadyExpired, family: famOne, build: set(famOne, 1_700_000_000_000_000)},
		{name: "explicit expired timestamp on default-expiry family", want: strategy.ErrAlreadyExpired, family: famDef, build: set(famDef, 1000)},
		{name: "negative explicit timestamp", want: strategy.ErrBeforeEpoch, family: famDef, build: set(famDef, -5000)},
		{name: "sequence timestamp not a multiple of 1000", want: strategy.ErrInvalidSequence, family: famSeq, build: func(m *bigtable.Mutation) {
			// The client truncates to the millisecond itself: 2500 arrives
			// as 2000, a valid seq*1000. Zero is the one it cannot fix.
			m.Set(famSeq, "c", 0, []byte("v"))
		}},
		{name: "AddToCell on managed family", want: ttlclient.ErrServerAssignedTimestamp, family: famDef, build: func(m *bigtable.Mutation) {
			m.AddIntToCell(famDef, "c", 0, 1)
		}},
		{name: "MergeToCell on managed family", want: ttlclient.ErrServerAssignedTimestamp, family: famOne, build: func(m *bigtable.Mutation) {
			m.MergeBytesToCell(famOne, "c", 0, []byte("x"))
		}},
		{name: "family not in schema", want: ttlclient.ErrUnknownFamily, family: "nope", build: set("nope", 1000)},
		{name: "empty family", want: ttlclient.ErrUnknownFamily, build: set("", 1000)},
		{name: "empty row key", want: ttlclient.ErrEmptyRowKey, row: "-", build: set(famPlain, 1000)},
		{name: "row key over 4 KiB", want: ttlclient.ErrRowKeyTooLong, row: strings.Repeat("k", ttlclient.MaxRowKeyBytes+1), build: set(famPlain, 1000)},
		{name: "no operations", want: ttlclient.ErrEmptyMutation, build: func(*bigtable.Mutation) {}},
		{name: "bad delete range", want: ttlclient.ErrInvalidTimestampRange, family: famDef, build: func(m *bigtable.Mutation) {
			m.DeleteTimestampRange(famDef, "c", 5000, 2000)
		}},
		{name: "value over 100 MiB", want: ttlclient.ErrValueTooLarge, family: famPlain, build: func(m *bigtable.Mutation) {
			m.Set(famPlain, "c", 1000, make([]byte, ttlclient.MaxValueBytes+1))
		}},
		{name: "refusal after a valid cell", want: strategy.ErrServerTimestamp, family: famOne, build: func(m *bigtable.Mutation) {
			m.Set(famPlain, "ok", 1000, []byte("v"))
			m.Set(famOne, "c", bigtable.ServerTime, []byte("v"))
		}},
	}
}

func (c rawGuardCase) rowKey() string {
	switch c.row {
	case "":
		return "row"
	case "-":
		return ""
	}
	return c.row
}

// Acceptance 2: every guardrail a *bigtable.Mutation can hit refuses
// through the TableAPI path with the sentinel of the ttlclient.Mutation
// path, before any RPC, and nothing is written.
func TestTableAPIGuardrailsRefuseBeforeAnyRPC(t *testing.T) {
	for _, c := range rawGuardCases() {
		t.Run(c.name, func(t *testing.T) {
			e, counter := newCountingEnv(t, mixedSchema())
			if !c.clock.IsZero() {
				e.h.Clock.Set(c.clock)
			}
			m := bigtable.NewMutation()
			c.build(m)
			before := counter.n.Load()
			err := e.tbl.API().Apply(e.ctx, c.rowKey(), m)
			require.ErrorIs(t, err, c.want)
			var ce *ttlclient.CellError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, "t", ce.Table)
			assert.Equal(t, c.family, ce.Family)
			assert.Equal(t, before, counter.n.Load(), "a refused write sent an RPC")
			assertTableEmpty(t, e)
		})
	}
}

// The rows of guardCases that need a cell option are, on the TableAPI
// path, refusals of Table.Timestamp: the same sentinels, before any write.
type timestampGuardCase struct {
	name   string
	family string
	ttl    time.Duration
	clock  time.Time
	want   error
}

func timestampGuardCases() []timestampGuardCase {
	nearMax := time.UnixMicro(int64(strategy.MaxTimestamp) - int64(time.Hour/time.Microsecond))
	return []timestampGuardCase{
		{"zero TTL", famDef, 0, time.Time{}, strategy.ErrInvalidTTL},
		{"negative TTL", famOne, -time.Second, time.Time{}, strategy.ErrInvalidTTL},
		{"TTL below timestamp precision", famOne, 999 * time.Microsecond, time.Time{}, strategy.ErrInvalidTTL},
		{"TTL overflowing int64", famOne, math.MaxInt64, nearMax, strategy.ErrTimestampOverflow},
		{"default-expiry timestamp before the epoch", famDef, time.Second, time.Unix(60, 0), strategy.ErrBeforeEpoch},
		{"TTL on sequence family", famSeq, time.Hour, time.Time{}, strategy.ErrWrongCellOption},
		{"TTL on unmanaged family", famPlain, time.Hour, time.Time{}, strategy.ErrWrongCellOption},
		{"family not in schema", "nope", time.Hour, time.Time{}, ttlclient.ErrUnknownFamily},
	}
}

// Every sentinel of guardCases (the ttlclient.Mutation path) has a row on
// the TableAPI path, as a *bigtable.Mutation or a Table.Timestamp refusal.
func TestTableAPIGuardCasesCoverEverySentinel(t *testing.T) {
	covered := map[error]bool{}
	for _, c := range rawGuardCases() {
		covered[c.want] = true
	}
	for _, c := range timestampGuardCases() {
		covered[c.want] = true
	}
	for _, c := range guardCases() {
		if c.want == ttlclient.ErrTimestampGranularity {
			continue // a *bigtable.Mutation cannot carry one: DeleteTimestampRange truncates its bounds
		}
		assert.True(t, covered[c.want], "%s: %v has no TableAPI row", c.name, c.want)
	}
}

func TestTableAPITimestampGuardrails(t *testing.T) {
	e := newEnv(t, mixedSchema())
	for _, c := range timestampGuardCases() {
		t.Run(c.name, func(t *testing.T) {
			if !c.clock.IsZero() {
				restore := e.h.Clock.Now()
				e.h.Clock.Set(c.clock)
				defer e.h.Clock.Set(restore)
			}
			ts, err := e.tbl.Timestamp(c.family, c.ttl)
			require.ErrorIs(t, err, c.want)
			assert.Zero(t, ts)
			var ce *ttlclient.CellError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, c.family, ce.Family)
			assert.Equal(t, c.ttl, ce.TTL)
		})
	}
}

// Other entry points: nil mutation, nested and conditional-in-bulk,
// ReadModifyWrite on managed families, a bad branch of a conditional.
func TestTableAPIGuardrailsOnOtherEntryPoints(t *testing.T) {
	e, counter := newCountingEnv(t, mixedSchema())
	api := e.tbl.API()
	before := counter.n.Load()

	assert.ErrorIs(t, api.Apply(e.ctx, "row", nil), ttlclient.ErrNilMutation)

	for _, fam := range []string{famOne, famDef, famSeq} {
		rmw := bigtable.NewReadModifyWrite()
		rmw.Increment(fam, "c", 1)
		_, err := api.ApplyReadModifyWrite(e.ctx, "row", rmw)
		assert.ErrorIs(t, err, ttlclient.ErrServerAssignedTimestamp, fam)
		var ce *ttlclient.CellError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, fam, ce.Family)
	}
	_, err := api.ApplyReadModifyWrite(e.ctx, "row", bigtable.NewReadModifyWrite())
	assert.ErrorIs(t, err, ttlclient.ErrEmptyMutation)

	// A conditional mutation nested in another: the client sends the
	// inner one's (empty) operations as the branch, so the request writes
	// nothing, which is refused as an empty mutation (bttl cannot see the
	// nesting: it does not read a *bigtable.Mutation).
	inner := bigtable.NewCondMutation(nil, bigtable.NewMutation(), nil)
	assert.ErrorIs(t, api.Apply(e.ctx, "row", bigtable.NewCondMutation(nil, inner, nil)), ttlclient.ErrEmptyMutation)

	bad := bigtable.NewMutation()
	bad.Set(famOne, "c", bigtable.ServerTime, []byte("v"))
	ok := bigtable.NewMutation()
	ok.Set(famPlain, "c", 1000, []byte("v"))
	assert.ErrorIs(t, api.Apply(e.ctx, "row", bigtable.NewCondMutation(nil, ok, bad)), strategy.ErrServerTimestamp)

	assert.Equal(t, before, counter.n.Load(), "a refused call sent an RPC")
	assertTableEmpty(t, e)

	// ReadModifyWrite on an unmanaged family goes through.
	rmw := bigtable.NewReadModifyWrite()
	rmw.Increment(famPlain, "n", 5)
	r, err := api.ApplyReadModifyWrite(e.ctx, "row", rmw)
	require.NoError(t, err)
	require.Len(t, r[famPlain], 1)
	assert.Equal(t, []byte{0, 0, 0, 0, 0, 0, 0, 5}, r[famPlain][0].Value)
}

// Server timestamps become the family's default TTL, explicit ones follow
// the family's convention, unmanaged ones are kept: as ttlclient.Mutation.
func TestTableAPITimestampsAsMutation(t *testing.T) {
	schema := mixedSchema()
	schema["onedef"] = strategy.OneSecond(strategy.WithDefaultTTL(time.Minute))
	e := newEnv(t, schema)
	now := e.h.Clock.Now()
	m := bigtable.NewMutation()
	m.Set(famDef, "auto", bigtable.ServerTime, []byte("a"))
	m.Set("onedef", "auto", bigtable.ServerTime, []byte("b"))
	m.Set(famSeq, "v", 7000, []byte("c"))
	m.Set(famPlain, "p", 123456, []byte("d"))
	m.Set(famDef, "real", bigtable.Time(now.Add(-time.Minute)), []byte("e"))
	require.NoError(t, e.tbl.API().Apply(e.ctx, "row", m))

	ms := func(t time.Time) bigtable.Timestamp {
		return bigtable.Timestamp(t.UnixMicro()).TruncateToMilliseconds()
	}
	assert.Equal(t, ms(now), e.storedTimestamp(t, "row", famDef, "auto"))
	assert.Equal(t, ms(now.Add(time.Minute)), e.storedTimestamp(t, "row", "onedef", "auto"))
	assert.Equal(t, bigtable.Timestamp(7000), e.storedTimestamp(t, "row", famSeq, "v"))
	assert.Equal(t, bigtable.Timestamp(123000), e.storedTimestamp(t, "row", famPlain, "p"))
	assert.Equal(t, ms(now.Add(-time.Minute)), e.storedTimestamp(t, "row", famDef, "real"))

	// The same cells written through ttlclient.Mutation land identically.
	tm := ttlclient.NewMutation()
	tm.Set(famDef, "auto", bigtable.ServerTime, []byte("a"))
	tm.Set("onedef", "auto", bigtable.ServerTime, []byte("b"))
	tm.Set(famSeq, "v", 7000, []byte("c"))
	tm.Set(famPlain, "p", 123456, []byte("d"))
	tm.Set(famDef, "real", bigtable.Time(now.Add(-time.Minute)), []byte("e"))
	require.NoError(t, e.tbl.Apply(e.ctx, "row2", tm))
	assert.Equal(t, e.stored(t, "row"), e.stored(t, "row2"))
}

// Table.Timestamp gives a cell its TTL through a *bigtable.Mutation: it is
// accepted as an explicit timestamp, read while live and hidden after,
// on both age strategies, including a TTL longer than D.
func TestTableAPITimestampGivesTTL(t *testing.T) {
	e := newEnv(t, mixedSchema())
	api := e.tbl.API()
	for _, c := range []struct {
		family string
		ttl    time.Duration
	}{
		{famOne, 10 * time.Minute},
		{famDef, 10 * time.Minute},
		{famDef, 3 * defaultD}, // the timestamp lies in the future
	} {
		row := c.family + "-" + c.ttl.String()
		ts, err := e.tbl.Timestamp(c.family, c.ttl)
		require.NoError(t, err)
		m := bigtable.NewMutation()
		m.Set(c.family, "c", ts, []byte("v"))
		require.NoError(t, api.Apply(e.ctx, row, m), row)
		ref := ttlclient.NewMutation()
		ref.SetTTL(c.family, "c", c.ttl, []byte("v"))
		require.NoError(t, e.tbl.Apply(e.ctx, row+"-ref", ref))
		// The same timestamp WithTTL gives.
		assert.Equal(t, e.storedTimestamp(t, row+"-ref", c.family, "c"), e.storedTimestamp(t, row, c.family, "c"), row)
	}
	e.h.Clock.Advance(10*time.Minute - time.Millisecond)
	for _, row := range []string{famOne + "-10m0s", famDef + "-10m0s", famDef + "-3h0m0s"} {
		r, err := api.ReadRow(e.ctx, row)
		require.NoError(t, err)
		assert.NotEmpty(t, r, "%s is live before its TTL", row)
	}
	e.h.Clock.Advance(time.Millisecond)
	for _, row := range []string{famOne + "-10m0s", famDef + "-10m0s"} {
		r, err := api.ReadRow(e.ctx, row)
		require.NoError(t, err)
		assert.Empty(t, r, "%s is hidden at its TTL", row)
		assert.NotEmpty(t, e.stored(t, row), "%s is still stored", row)
	}
	r, err := api.ReadRow(e.ctx, famDef+"-3h0m0s")
	require.NoError(t, err)
	assert.NotEmpty(t, r)

	// Computed too early, a short TTL has run out by the write: refused.
	ts, err := e.tbl.Timestamp(famOne, time.Second)
	require.NoError(t, err)
	e.h.Clock.Advance(time.Second)
	m := bigtable.NewMutation()
	m.Set(famOne, "c", ts, []byte("v"))
	require.ErrorIs(t, api.Apply(e.ctx, "late", m), strategy.ErrAlreadyExpired)
}

// A conditional *bigtable.Mutation's predicate gets the TTL filter: an
// expired cell does not satisfy it.
func TestTableAPICondMutationIgnoresExpiredCells(t *testing.T) {
	e := newEnv(t, mixedSchema())
	api := e.tbl.API()
	ts, err := e.tbl.Timestamp(famDef, time.Minute)
	require.NoError(t, err)
	m := bigtable.NewMutation()
	m.Set(famDef, "lock", ts, []byte("held"))
	require.NoError(t, api.Apply(e.ctx, "row", m))
	e.h.Clock.Advance(5 * time.Minute)

	onTrue := bigtable.NewMutation()
	onTrue.Set(famPlain, "branch", 1000, []byte("true"))
	onFalse := bigtable.NewMutation()
	onFalse.Set(famPlain, "branch", 1000, []byte("false"))
	var matched bool
	cond := bigtable.NewCondMutation(bigtable.ColumnFilter("^lock$"), onTrue, onFalse)
	require.NoError(t, api.Apply(e.ctx, "row", cond, bigtable.GetCondMutationResult(&matched)))
	assert.False(t, matched)
	// The raw client, unfiltered, sees the expired lock.
	require.NoError(t, e.tbl.Raw().Apply(e.ctx, "row", cond, bigtable.GetCondMutationResult(&matched)))
	assert.True(t, matched)
}

// Acceptance 2 (ApplyBulk): each bad row is refused with its sentinel and
// not written; the good rows are.
func TestTableAPIApplyBulkRefusesOnlyBadRows(t *testing.T) {
	e := newEnv(t, mixedSchema())
	var keys []string
	var muts []*bigtable.Mutation
	var wants []error
	for i, c := range rawGuardCases() {
		if !c.clock.IsZero() || c.row != "" {
			continue // needs its own clock or row key
		}
		good := bigtable.NewMutation()
		good.Set(famDef, "c", bigtable.ServerTime, []byte("good"))
		keys = append(keys, "good"+string(rune('a'+i)))
		muts = append(muts, good)
		wants = append(wants, nil)

		bad := bigtable.NewMutation()
		c.build(bad)
		keys = append(keys, "bad"+string(rune('a'+i)))
		muts = append(muts, bad)
		wants = append(wants, c.want)
	}
	// (A conditional mutation in ApplyBulk is the client's own refusal,
	// of the whole call, before bttl sees anything.)
	keys = append(keys, "nil")
	muts = append(muts, nil)
	wants = append(wants, ttlclient.ErrNilMutation)

	errs, err := e.tbl.API().ApplyBulk(e.ctx, keys, muts)
	require.NoError(t, err)
	require.Len(t, errs, len(keys))
	for i, want := range wants {
		r, err := e.h.Stored(e.ctx, "t", keys[i])
		require.NoError(t, err)
		if want == nil {
			assert.NoError(t, errs[i], keys[i])
			assert.Len(t, r[famDef], 1, keys[i])
			continue
		}
		assert.ErrorIs(t, errs[i], want, keys[i])
		assert.Nil(t, r, "refused row %s was written", keys[i])
	}

	good := bigtable.NewMutation()
	good.Set(famPlain, "c", 1000, []byte("v"))
	errs, err = e.tbl.API().ApplyBulk(e.ctx, []string{"x", "y"}, []*bigtable.Mutation{good, good})
	require.NoError(t, err)
	assert.Nil(t, errs)
	_, err = e.tbl.API().ApplyBulk(e.ctx, []string{"x"}, nil)
	assert.Error(t, err)
}

// Reads through the TableAPI are filtered: an expired cell the raw client
// still returns is hidden.
func TestTableAPIReadsFiltered(t *testing.T) {
	e := newEnv(t, mixedSchema())
	api := e.tbl.API()
	m := bigtable.NewMutation()
	m.Set(famDef, "c", bigtable.ServerTime, []byte("v"))
	require.NoError(t, api.Apply(e.ctx, "row", m))
	e.h.Clock.Advance(defaultD)

	r, err := api.ReadRow(e.ctx, "row")
	require.NoError(t, err)
	assert.Empty(t, r)
	n := 0
	require.NoError(t, api.ReadRows(e.ctx, bigtable.InfiniteRange(""), func(bigtable.Row) bool { n++; return true }))
	assert.Zero(t, n)
	assert.Len(t, e.stored(t, "row"), 1, "the raw client still returns the expired cell")
	_, err = api.SampleRowKeys(e.ctx)
	require.NoError(t, err)
}

// The one difference from ttlclient.Mutation: bigtable.Mutation.Set
// truncates its timestamp to the millisecond before bttl sees it, so a
// sequence timestamp that is not an exact seq*1000 (refused by
// ttlclient.Mutation) arrives as the version below it.
func TestTableAPISequenceTimestampArrivesTruncated(t *testing.T) {
	e := newEnv(t, mixedSchema())
	m := bigtable.NewMutation()
	m.Set(famSeq, "c", 2500, []byte("v"))
	require.NoError(t, e.tbl.API().Apply(e.ctx, "row", m))
	assert.Equal(t, bigtable.Timestamp(2000), e.storedTimestamp(t, "row", famSeq, "c"))

	tm := ttlclient.NewMutation()
	tm.Set(famSeq, "c", 2500, []byte("v"))
	require.ErrorIs(t, e.tbl.Apply(e.ctx, "row2", tm), strategy.ErrInvalidSequence)
}

// The caller's mutation is read, never changed: applied again later, its
// server timestamp is assigned again at the new time, and the raw client
// still sends it as a server timestamp.
func TestTableAPILeavesCallerMutationUnchanged(t *testing.T) {
	e := newEnv(t, mixedSchema())
	api := e.tbl.API()
	m := bigtable.NewMutation()
	m.Set(famDef, "c", bigtable.ServerTime, []byte("v"))
	require.NoError(t, api.Apply(e.ctx, "a", m))
	e.h.Clock.Advance(time.Minute)
	require.NoError(t, api.Apply(e.ctx, "b", m))
	first, second := e.storedTimestamp(t, "a", famDef, "c"), e.storedTimestamp(t, "b", famDef, "c")
	assert.Equal(t, first+bigtable.Timestamp(time.Minute/time.Microsecond), second)

	// The server's real time is neither: bttl's clock started at the real
	// time and was moved a minute ahead, and setting up took over 1ms.
	require.NoError(t, e.tbl.Raw().Apply(e.ctx, "raw", m))
	raw := e.storedTimestamp(t, "raw", famDef, "c")
	assert.NotEqual(t, first, raw, "the mutation was rewritten in place")
	assert.NotEqual(t, second, raw, "the mutation was rewritten in place")
}

package model_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/testsuite/internal/model"
)

const now = int64(1_700_000_000_123_456) // sub-millisecond digits on purpose

// nowTime is now as the clock reading writes take.
var nowTime = time.UnixMicro(now)

func schema() strategy.Schema {
	return strategy.Schema{
		"one":   strategy.OneSecond(strategy.WithMaxVersions(2)),
		"def":   strategy.DefaultExpiry(time.Hour),
		"sv":    strategy.DefaultExpiry(time.Hour, strategy.SingleValue()),
		"seq":   strategy.Sequence(2),
		"plain": strategy.Unmanaged(),
	}
}

func tss(cs []model.Cell) []int64 {
	var out []int64
	for _, c := range cs {
		out = append(out, c.TS)
	}
	return out
}

func TestTimestampsAndLiveness(t *testing.T) {
	m := model.New(schema())
	require.NoError(t, m.Apply("r", nowTime, []model.Op{
		{Kind: model.SetTTL, Family: "one", Column: "c", TTL: time.Second, Value: "a"},
		{Kind: model.SetTTL, Family: "def", Column: "c", TTL: 30 * time.Minute, Value: "b"},
		{Kind: model.SetSeq, Family: "seq", Column: "c", Seq: 7, Value: "c"},
		{Kind: model.SetExplicit, Family: "plain", Column: "c", TS: 2500, Value: "d"},
	}))
	oneTS := int64(1_700_000_001_123_000)                             // ms(now + 1s)
	defTS := int64(1_700_000_000_123_456-1_800_000_000) / 1000 * 1000 // ms(now + 30m - 1h)
	assert.Equal(t, []int64{defTS, oneTS, 2000, 7000}, tss(m.View("r", now)))
	// One-second: live while ts > t. Default expiry: while ts + D > t.
	assert.Equal(t, []int64{defTS, 2000, 7000}, tss(m.View("r", oneTS)))
	assert.Equal(t, []int64{defTS, oneTS, 2000, 7000}, tss(m.View("r", oneTS-1)))
	defEnd := defTS + int64(time.Hour/time.Microsecond)
	assert.Equal(t, []int64{2000, 7000}, tss(m.View("r", defEnd)))
	assert.Len(t, m.Stored("r"), 4, "expired cells stay stored until deleted")
}

func TestRefusalsWriteNothing(t *testing.T) {
	m := model.New(schema())
	for name, op := range map[string]model.Op{
		"zero TTL":                 {Kind: model.SetTTL, Family: "def", Column: "c", TTL: 0},
		"one-second in the past":   {Kind: model.SetExplicit, Family: "one", Column: "c", TS: now},
		"auto without default TTL": {Kind: model.SetAuto, Family: "one", Column: "c"},
		"sequence 0":               {Kind: model.SetSeq, Family: "seq", Column: "c"},
		"seq not *1000":            {Kind: model.SetExplicit, Family: "seq", Column: "c", TS: 1500},
		"unknown family":           {Kind: model.SetExplicit, Family: "x", Column: "c", TS: 1000},
		"inverted range":           {Kind: model.DeleteRange, Family: "def", Column: "c", TS: 5000, End: 5000},
	} {
		err := m.Apply("r", nowTime, []model.Op{{Kind: model.SetExplicit, Family: "plain", Column: "ok", TS: 1000}, op})
		assert.ErrorIs(t, err, model.ErrRefused, name)
	}
	assert.Empty(t, m.RowKeys())
}

func TestVersionsSingleValueAndFilters(t *testing.T) {
	m := model.New(schema())
	for i, ttl := range []time.Duration{3 * time.Second, 2 * time.Second, time.Second} {
		require.NoError(t, m.Apply("r", nowTime, []model.Op{{Kind: model.SetTTL, Family: "one", Column: "c", TTL: ttl, Value: string(rune('a' + i))}}))
	}
	// Max versions 2 counts live cells only: after the 1s cell expires the
	// two others are kept.
	assert.Equal(t, []string{"a", "b"}, values(m.View("r", now)))
	assert.Equal(t, []string{"a", "b"}, values(m.View("r", now+1_500_000)))
	assert.Equal(t, []string{"a"}, values(m.Read("r", now, model.LatestN(1))))
	assert.Equal(t, []string{"b"}, values(m.Read("r", now, model.ValueRange("b", "c"))))

	// Single value: the last write wins even with a shorter TTL.
	require.NoError(t, m.Apply("s", nowTime, []model.Op{{Kind: model.SetTTL, Family: "sv", Column: "c", TTL: 2 * time.Hour, Value: "long"}}))
	require.NoError(t, m.Apply("s", nowTime, []model.Op{{Kind: model.SetTTL, Family: "sv", Column: "c", TTL: time.Minute, Value: "short"}}))
	assert.Equal(t, []string{"short"}, values(m.View("s", now)))

	// Same millisecond: the later write replaces the earlier.
	require.NoError(t, m.Apply("t", nowTime, []model.Op{
		{Kind: model.SetTTL, Family: "def", Column: "c", TTL: time.Minute, Value: "x"},
		{Kind: model.SetTTL, Family: "def", Column: "c", TTL: time.Minute + 300*time.Microsecond, Value: "y"},
	}))
	assert.Equal(t, []string{"y"}, values(m.View("t", now)))
}

func TestResurrects(t *testing.T) {
	m := model.New(schema())
	for seq := int64(1); seq <= 3; seq++ {
		require.NoError(t, m.Apply("r", nowTime, []model.Op{{Kind: model.SetSeq, Family: "seq", Column: "c", Seq: seq}}))
	}
	// Seq 1 is beyond the 2 kept: deleting seq 3 alone would bring it back.
	top := []model.Op{{Kind: model.DeleteRange, Family: "seq", Column: "c", TS: 3000, End: 4000}}
	assert.True(t, m.Resurrects("r", nowTime, top))
	bottom := []model.Op{{Kind: model.DeleteRange, Family: "seq", Column: "c", TS: 0, End: 4000}}
	assert.False(t, m.Resurrects("r", nowTime, bottom))
	assert.True(t, m.Collectable("r", "seq", "c", 1000, now))
	assert.False(t, m.Collectable("r", "seq", "c", 3000, now))
	// Writing seq 1 again after deleting the family is a new cell at the
	// shadowed one's timestamp, not the old one brought back (1M-step run,
	// seed 20261124, step 882534).
	rewrite := []model.Op{{Kind: model.DeleteFamily, Family: "seq"}, {Kind: model.SetSeq, Family: "seq", Column: "c", Seq: 1}}
	assert.False(t, m.Resurrects("r", nowTime, rewrite))
	// So is rewriting it in place while deleting the newer ones.
	inPlace := []model.Op{{Kind: model.SetSeq, Family: "seq", Column: "c", Seq: 1}, {Kind: model.DeleteRange, Family: "seq", Column: "c", TS: 2000, End: 4000}}
	assert.False(t, m.Resurrects("r", nowTime, inPlace))
	// Deleting only the newer ones still brings the old seq 1 back.
	assert.True(t, m.Resurrects("r", nowTime, []model.Op{{Kind: model.DeleteRange, Family: "seq", Column: "c", TS: 2000, End: 4000}}))
}

func values(cs []model.Cell) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Value)
	}
	return out
}

// The model, like the library, adds a TTL to the clock reading in nanoseconds
// and truncates once: clock T+999.6µs and ttl 1ms+500ns give ms(T+2000.1µs) =
// T+2000, where truncating each to the microsecond first gave T+1000
// (issue 14, finding 10(a)).
func TestTimestampFromNanoseconds(t *testing.T) {
	m := model.New(schema())
	base := int64(1_700_000_000_000_000)
	clock := time.UnixMicro(base).Add(999*time.Microsecond + 600*time.Nanosecond)
	ttl := time.Millisecond + 500*time.Nanosecond
	require.NoError(t, m.Apply("r", clock, []model.Op{
		{Kind: model.SetTTL, Family: "one", Column: "c", TTL: ttl, Value: "a"},
		{Kind: model.SetTTL, Family: "def", Column: "c", TTL: time.Hour + ttl, Value: "b"},
	}))
	assert.Equal(t, []int64{base + 2000, base + 2000}, tss(m.Stored("r")))
	// Live until the clock reaches now+ttl = T+2000.1µs.
	assert.Len(t, m.View("r", base+1999), 2)
	assert.Len(t, m.View("r", base+2000), 1, "the one-second cell expires at its timestamp")
}

// Past the largest timestamp a one-second cell cannot be live, and no write
// can store one (issue 14, finding 10(b)).
func TestPastMaxTimestamp(t *testing.T) {
	m := model.New(strategy.Schema{"one": strategy.OneSecond(strategy.WithDefaultTTL(time.Hour)), "plain": strategy.Unmanaged()})
	end := time.UnixMicro(int64(strategy.MaxTimestamp) + 500)
	for name, op := range map[string]model.Op{
		"explicit max": {Kind: model.SetExplicit, Family: "one", Column: "c", TS: int64(strategy.MaxTimestamp)},
		"TTL":          {Kind: model.SetTTL, Family: "one", Column: "c", TTL: time.Millisecond},
		"auto":         {Kind: model.SetAuto, Family: "one", Column: "c"},
	} {
		assert.ErrorIs(t, m.Check("r", end, []model.Op{op}), model.ErrRefused, name)
	}
	before := time.UnixMicro(int64(strategy.MaxTimestamp) - 1)
	require.NoError(t, m.Apply("r", before, []model.Op{{Kind: model.SetExplicit, Family: "one", Column: "c", TS: int64(strategy.MaxTimestamp)}}))
	assert.Len(t, m.View("r", int64(strategy.MaxTimestamp)-1), 1)
	assert.Empty(t, m.View("r", int64(strategy.MaxTimestamp)))
	assert.Empty(t, m.View("r", end.UnixMicro()))
}

// A max TTL refuses a longer TTL, or an explicit timestamp implying one,
// unless the family clamps; the wire path never clamps, and has no
// timestamp of its own to assign.
func TestMaxTTLClampAndWire(t *testing.T) {
	capped := strategy.Schema{
		"cap":   strategy.OneSecond(strategy.WithMaxTTL(2*time.Second, strategy.RefuseLonger)),
		"clamp": strategy.OneSecond(strategy.WithMaxTTL(2*time.Second, strategy.ClampLonger), strategy.WithDefaultTTL(3*time.Second)),
		"def":   strategy.DefaultExpiry(time.Second, strategy.WithMaxTTL(2*time.Second, strategy.RefuseLonger)),
	}
	at2s := int64(1_700_000_002_123_000) // ms(now + 2s)
	set := func(fam string, kind model.OpKind, ttl time.Duration, ts int64) []model.Op {
		return []model.Op{{Kind: kind, Family: fam, Column: "c", TTL: ttl, TS: ts, Value: "v"}}
	}
	for _, tc := range []struct {
		name  string
		sem   model.Semantics
		ops   []model.Op
		class model.Class // "" accepted, stored at ts
		ts    int64
	}{
		{"TTL at the cap", model.Semantics{}, set("cap", model.SetTTL, 2*time.Second, 0), "", at2s},
		{"TTL over the cap", model.Semantics{}, set("cap", model.SetTTL, 3*time.Second, 0), model.ClassTTLTooLong, 0},
		{"TTL over the cap, clamped", model.Semantics{}, set("clamp", model.SetTTL, time.Hour, 0), "", at2s},
		{"default TTL over the cap, clamped", model.Semantics{}, set("clamp", model.SetAuto, 0, 0), "", at2s},
		{"explicit over the cap", model.Semantics{}, set("cap", model.SetExplicit, 0, now+3_000_000), model.ClassTTLTooLong, 0},
		{"explicit over the cap, clamped", model.Semantics{}, set("clamp", model.SetExplicit, 0, now+3_000_000), "", at2s},
		{"default expiry: a future write time implies ts + D - now", model.Semantics{}, set("def", model.SetExplicit, 0, now+1_500_000), model.ClassTTLTooLong, 0},
		{"wire: explicit over the cap is refused even clamping", model.Semantics{Wire: true}, set("clamp", model.SetExplicit, 0, now+3_000_000), model.ClassTTLTooLong, 0},
		{"wire: no default timestamp", model.Semantics{Wire: true}, set("clamp", model.SetAuto, 0, 0), model.ClassServerTimestamp, 0},
		{"order: the first refused op names the class", model.Semantics{},
			append(set("cap", model.SetExplicit, 0, now), set("cap", model.SetTTL, time.Hour, 0)...), model.ClassExpired, 0},
		{"StampTTL: a TTL's refusal comes first", model.Semantics{StampTTL: true},
			append(set("cap", model.SetExplicit, 0, now), set("cap", model.SetTTL, time.Hour, 0)...), model.ClassTTLTooLong, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := model.NewWith(capped, tc.sem)
			err := m.Apply("r", nowTime, tc.ops)
			if tc.class != "" {
				require.ErrorIs(t, err, model.ErrRefused)
				assert.Equal(t, tc.class, model.ClassOf(err))
				assert.Empty(t, m.Stored("r"), "a refusal writes nothing")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []int64{tc.ts}, tss(m.Stored("r")))
		})
	}
}

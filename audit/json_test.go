package audit_test

import (
	"encoding/json"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/audit"
	scan "github.com/bttl/bttl/internal/scanjob"
)

// A report's instants (now, oldest_expiry) are RFC 3339 UTC in JSON, to the
// microsecond, not microseconds since the epoch; a cell's timestamp stays the
// raw number. The earlier form still reads (issue 27 item 10).
func TestReportJSONInstantsAreRFC3339(t *testing.T) {
	now := bigtable.Time(time.Date(2027, 1, 2, 15, 4, 5, 123456000, time.UTC))
	oldest := bigtable.Time(time.Date(2026, 12, 31, 0, 0, 0, 1000, time.UTC))
	rep := &audit.Report{Table: "events", Now: now, Rows: 3, Cells: 4,
		Families: []audit.Family{
			{Family: "clicks", Strategy: "default-expiry(D=48h0m0s)", Cells: 4, Expired: 2, OldestExpiry: oldest,
				SequenceNumbersExample: &audit.Cell{Row: "r", Column: "clicks:c", Timestamp: 5000}},
			{Family: "doc", Strategy: "sequence(N=2)"},
		},
		Schema: map[string]string{"clicks": "default-expiry(D=48h0m0s)"},
		Shard:  &scan.Shard{Index: 1, Count: 2}, Ranges: []scan.Range{{Start: "m", End: ""}}}
	b, err := json.Marshal(rep)
	require.NoError(t, err)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(b, &raw))
	assert.Equal(t, "2027-01-02T15:04:05.123456Z", raw["now"])
	fams := raw["families"].([]any)
	assert.Equal(t, "2026-12-31T00:00:00.000001Z", fams[0].(map[string]any)["oldest_expiry"])
	assert.NotContains(t, fams[1].(map[string]any), "oldest_expiry", "no expired cell: no instant")
	assert.EqualValues(t, 5000, fams[0].(map[string]any)["sequence_number_example"].(map[string]any)["timestamp"], "a cell timestamp stays raw")
	assert.Regexp(t, `^\{"table":"events","now":`, string(b), "table and now lead, as before")

	var back audit.Report
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, rep, &back, "round trip")

	// The earlier form, microseconds.
	old := `{"table":"events","now":1798902245123456,"rows":3,"cells":4,"families":[{"family":"clicks","strategy":"default-expiry(D=48h0m0s)","cells":4,"expired_cells":2,"oldest_expiry":1798675200000001}]}`
	var fromOld audit.Report
	require.NoError(t, json.Unmarshal([]byte(old), &fromOld))
	assert.Equal(t, now, fromOld.Now)
	assert.Equal(t, oldest, fromOld.Families[0].OldestExpiry)

	for _, bad := range []string{`{"now":"yesterday"}`, `{"now":true}`, `{"families":[{"oldest_expiry":"2026-13-01T00:00:00Z"}]}`} {
		var r audit.Report
		assert.Error(t, json.Unmarshal([]byte(bad), &r), bad)
	}
}

// An instant outside the years time.Time.UnixNano holds (1678-2262) reads
// back as written: RFC 3339 has room for it, and -now may name it. Fails
// before the fix: bigtable.Time went through UnixNano, which overflowed.
func TestReportJSONInstantsOutsideNanosecondRange(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2300, 1, 2, 3, 4, 5, 6000, time.UTC),
		time.Date(1600, 1, 2, 3, 4, 5, 6000, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
	} {
		ts := bigtable.Timestamp(tm.Unix()*1e6 + int64(tm.Nanosecond()/1e3))
		rep := &audit.Report{Table: "events", Now: ts, Families: []audit.Family{{Family: "clicks", OldestExpiry: ts}}}
		b, err := json.Marshal(rep)
		require.NoError(t, err)
		require.Contains(t, string(b), tm.Format(time.RFC3339Nano))
		var back audit.Report
		require.NoError(t, json.Unmarshal(b, &back))
		assert.Equal(t, ts, back.Now, tm)
		assert.Equal(t, ts, back.Families[0].OldestExpiry, tm)
	}
}

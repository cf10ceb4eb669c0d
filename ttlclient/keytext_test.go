package ttlclient_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// Row keys and qualifiers in messages (docs/design.md#keys-in-messages)
// (issue 30 item 7).

const (
	secretRow = "alice@example.com"
	secretCol = "bob@example.com"
	famWT     = "wt" // default expiry with write-time companions
)

func keytextSchema() strategy.Schema {
	s := mixedSchema()
	s[famWT] = strategy.DefaultExpiry(defaultD, strategy.WithWriteTime())
	s[famIdleOne] = strategy.OneSecond(strategy.WithIdleTTL(idleTTL, strategy.DefaultIdleDebounce))
	return s
}

// refusalTexts is every text a refusal puts where logs pick it up: its
// message and its gRPC status (message and details).
func refusalTexts(t *testing.T, err error) string {
	t.Helper()
	require.Error(t, err)
	st, ok := status.FromError(err)
	require.True(t, ok, "a refusal has a gRPC status: %v", err)
	return err.Error() + "\n" + st.Message() + "\n" + prototext.Format(st.Proto())
}

// keyRefusals provokes, on tbl, a refusal naming secretRow and/or
// secretCol through each path that makes one, and returns them by name.
func keyRefusals(t *testing.T, e *env, tbl *ttlclient.Table, extra ...ttlclient.Option) map[string]error {
	t.Helper()
	ctx := e.ctx
	out := map[string]error{}

	m := ttlclient.NewMutation()
	m.SetVersion(famSeq, secretCol, -2, []byte("v"))
	out["Apply"] = tbl.Apply(ctx, secretRow, m)

	errs, err := tbl.ApplyBulk(ctx, []string{secretRow}, []*ttlclient.Mutation{m})
	require.NoError(t, err)
	out["ApplyBulk"] = errs[0]

	raw := bigtable.NewMutation()
	raw.Set(famOne, secretCol, bigtable.ServerTime, []byte("v"))
	out["Table.API().Apply"] = tbl.API().Apply(ctx, secretRow, raw)

	rmw := ttlclient.NewReadModifyWrite()
	rmw.Increment(famDef, secretCol, 1)
	_, out["ApplyReadModifyWrite"] = tbl.ApplyReadModifyWrite(ctx, secretRow, rmw)

	reserved := ttlclient.NewMutation()
	reserved.SetTTL(famWT, "\xff\xff"+secretCol, time.Minute, []byte("v"))
	out["reserved column"] = tbl.Apply(ctx, secretRow, reserved)

	_, out["Expiry"] = tbl.Expiry(bigtable.ReadItem{Row: secretRow, Column: secretCol, Timestamp: 1000})

	long := strings.Repeat(secretRow, 10<<10/len(secretRow)+1)
	out["row key over 4 KiB"] = tbl.Apply(ctx, long, m)

	// A cell too large to pin: the *CellError wraps a *filters.PinError,
	// whose own message names the column.
	big := bigtable.NewMutation()
	big.Set(famDef, secretCol, bigtable.Time(e.h.Clock.Now()), bytes.Repeat([]byte("x"), 20<<10))
	require.NoError(t, tbl.Raw().Apply(ctx, secretRow, big))
	_, out["Expire"] = tbl.Expire(ctx, secretRow, famDef, secretCol, time.Minute)
	_, out["ExpireColumn"] = tbl.ExpireColumn(ctx, secretRow, famDef, secretCol, time.Minute)

	sqlOpts := []bigtable.PrepareOption{}
	for _, o := range extra {
		sqlOpts = append(sqlOpts, o)
	}
	_, out["PrepareStatement"] = e.h.Client.PrepareStatement(ctx, "SELECT * FROM t WHERE _key = '"+secretRow+"'", nil, sqlOpts...)
	// A query the check cannot parse: the reason quotes a token of it.
	_, out["PrepareStatement unparsed"] = e.h.Client.PrepareStatement(ctx, secretRow+" SELECT 1", nil, sqlOpts...)
	return out
}

func TestRefusalsShowKeysQuotedAndCut(t *testing.T) {
	e := newEnv(t, keytextSchema())
	ctx := e.ctx
	refusals := keyRefusals(t, e, e.tbl)
	for name, err := range refusals {
		txt := refusalTexts(t, err)
		switch name {
		case "row key over 4 KiB":
			assert.Contains(t, txt, strconv.Quote(strings.Repeat(secretRow, 4)[:64])+"...(", name)
		case "PrepareStatement", "PrepareStatement unparsed":
			assert.Contains(t, txt, secretRow, name)
		default:
			assert.Contains(t, txt, strconv.Quote(secretRow), name)
		}
	}
	for _, name := range []string{"Apply", "ApplyBulk", "Table.API().Apply", "ApplyReadModifyWrite", "Expire", "ExpireColumn"} {
		assert.Contains(t, refusals[name].Error(), "column "+strconv.Quote(secretCol), name)
	}
	assert.Contains(t, refusals["reserved column"].Error(), `column "\xff\xff`+secretCol+`"`, "binary bytes escaped")

	// A newline in a key cannot end the log line; a quote cannot close
	// the key early.
	m := ttlclient.NewMutation()
	m.SetVersion(famSeq, "c\"\n", -2, []byte("v"))
	err := e.tbl.Apply(ctx, "u1\nlevel=ERROR msg=forged", m)
	assert.NotContains(t, err.Error(), "\n")
	assert.Contains(t, err.Error(), `row "u1\nlevel=ERROR msg=forged", family "seq", column "c\"\n"`)

	// Binary bytes are escaped.
	err = e.tbl.Apply(ctx, "\x00\xff\x1b[31m", m)
	assert.Contains(t, err.Error(), `row "\x00\xff\x1b[31m"`)

	// A 10 KB key is cut, with its length; the field keeps it whole.
	long := strings.Repeat("k", 10<<10)
	err = e.tbl.Apply(ctx, long, m)
	require.ErrorIs(t, err, ttlclient.ErrRowKeyTooLong)
	assert.Contains(t, err.Error(), `row "`+strings.Repeat("k", 64)+`"...(10240 bytes)`)
	assert.Less(t, len(err.Error()), 300)
	var ce *ttlclient.CellError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, long, ce.Row)

	// A 10 KB qualifier too.
	longCol := strings.Repeat("q", 10<<10)
	m = ttlclient.NewMutation()
	m.SetVersion(famSeq, longCol, -2, []byte("v"))
	err = e.tbl.Apply(ctx, "r", m)
	assert.Contains(t, err.Error(), `column "`+strings.Repeat("q", 64)+`"...(10240 bytes)`)
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, longCol, ce.Column)

	var se *ttlclient.SQLError
	require.True(t, errors.As(refusals["PrepareStatement"], &se))
	assert.Contains(t, se.Query, secretRow)
}

func TestWithKeyRedactionKeepsKeysOutOfMessagesAndLogs(t *testing.T) {
	hashKey := []byte("the team's secret")
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newEnv(t, keytextSchema(), ttlclient.WithKeyRedaction(hashKey), ttlclient.WithLogger(logger))
	refusals := keyRefusals(t, e, e.tbl, ttlclient.WithKeyRedaction(hashKey))

	// A time-to-idle refresh that fails (a value too large to pin) is
	// logged with its error.
	m := ttlclient.NewMutation()
	m.SetTTL(famIdleOne, secretCol, time.Minute, bytes.Repeat([]byte("x"), 20<<10))
	e.apply(t, secretRow, m)
	_, err := e.tbl.ReadRow(e.ctx, secretRow)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, e.h.Client.FlushIdleRefreshes(ctx))
	require.Contains(t, logs.String(), "time-to-idle refresh failed", "the refresh failure was logged")
	require.Contains(t, logs.String(), "redacted 15 bytes hmac:", "the logged error names the column, redacted")

	require.Len(t, refusals, 11)
	for name, err := range refusals {
		txt := refusalTexts(t, err)
		for _, secret := range []string{"alice", "bob"} {
			assert.NotContains(t, txt, secret, name)
		}
		assert.Contains(t, txt, "[redacted ", name)
	}
	for _, secret := range []string{"alice", "bob"} {
		assert.NotContains(t, logs.String(), secret)
	}

	// Messages about the same key carry the same tag; the fields keep the
	// values.
	tag := func(err error, what string) string {
		msg := err.Error()
		i := strings.Index(msg, what+" [redacted ")
		require.GreaterOrEqual(t, i, 0, msg)
		return msg[i+len(what)+1 : i+len(what)+1+strings.Index(msg[i+len(what)+1:], "]")+1]
	}
	assert.Equal(t, tag(refusals["Apply"], "row"), tag(refusals["Expire"], "row"))
	assert.Equal(t, tag(refusals["Apply"], "column"), tag(refusals["Expire"], "column"))
	assert.NotEqual(t, tag(refusals["Apply"], "row"), tag(refusals["Apply"], "column"))
	var ce *ttlclient.CellError
	require.True(t, errors.As(refusals["Expire"], &ce))
	assert.Equal(t, secretRow, ce.Row)
	assert.Equal(t, secretCol, ce.Column)
	var pe *filters.PinError
	require.True(t, errors.As(refusals["Expire"], &pe))
	assert.Equal(t, secretCol, pe.Column)
	assert.Contains(t, pe.Error(), secretCol, "the PinError alone is filters', which does not redact")
	var se *ttlclient.SQLError
	require.True(t, errors.As(refusals["PrepareStatement"], &se))
	assert.Contains(t, se.Query, secretRow)
	require.True(t, errors.As(refusals["PrepareStatement unparsed"], &se))
	assert.Contains(t, se.Reason, "alice", "the reason quotes a token; the message withholds it")

	// A table opened without the option, on the same client, quotes.
	plain := e.h.MustTable(t, "t", keytextSchema())
	m = ttlclient.NewMutation()
	m.SetVersion(famSeq, secretCol, -2, []byte("v"))
	assert.Contains(t, plain.Apply(e.ctx, secretRow, m).Error(), strconv.Quote(secretRow))
}

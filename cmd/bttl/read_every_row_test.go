package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bttl read -json stopped at a cell whose expiry is past year 9999 and exited
// 0 with the rest of the range missing; lookup and read printed a negative
// remaining TTL for cells expiring more than ~292 years out. Every row now
// comes out, each remaining TTL a bound, not a negative (issue 35 item 7).
func TestReadFarFutureExpiryShowsEveryRow(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "users", ColumnFamilies: map[string]bigtable.Family{
		"session": {}, "doc": {}, "raw": {},
	}}))
	schemaPath := writeFile(t, "schema.yaml", lookupSchemaYAML)
	tbl := dc.Open("users")
	far := bigtable.Timestamp(time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro())
	for i, k := range []string{"a", "b", "c"} {
		m := bigtable.NewMutation()
		ts := bigtable.Time(time.Now().Add(time.Hour)).TruncateToMilliseconds()
		if i == 1 {
			ts = far
		}
		m.Set("session", "tok", ts, []byte(k))
		require.NoError(t, tbl.Apply(ctx, k, m))
	}
	r := bttl(t, addr, "", "-schema", schemaPath, "read", "-json", "users")
	require.Equal(t, exitOK, r.code, r.stderr)
	var keys []string
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var j rowJSON
		require.NoError(t, json.Unmarshal(sc.Bytes(), &j))
		keys = append(keys, *j.Row)
		if *j.Row == "b" {
			require.Len(t, j.Cells, 1)
			assert.Equal(t, time.Duration(math.MaxInt64), j.Cells[0].Remaining)
			assert.Equal(t, 12000, j.Cells[0].Expiry.Year())
		}
	}
	assert.Equal(t, []string{"a", "b", "c"}, keys)

	r = bttl(t, addr, "", "-schema", schemaPath, "lookup", "users", "b")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "live until +12000-01-01T00:00:00.000000Z (more than 106751d left)")
}

// failingWriter accepts n writes, then fails every one.
type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, errors.New("disk full")
	}
	w.n--
	return len(p), nil
}

// A row read cannot write fails bttl read (exit 2, naming the row) rather
// than ending the range in silence with exit 0.
func TestReadStopsLoudlyWhenARowCannotBeWritten(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "users", ColumnFamilies: map[string]bigtable.Family{
		"session": {}, "doc": {}, "raw": {},
	}}))
	schemaPath := writeFile(t, "schema.yaml", lookupSchemaYAML)
	tbl := dc.Open("users")
	for _, k := range []string{"a", "b", "c"} {
		m := bigtable.NewMutation()
		m.Set("raw", "x", 1000, []byte(k))
		require.NoError(t, tbl.Apply(ctx, k, m))
	}
	t.Setenv("BIGTABLE_EMULATOR_HOST", addr)
	var errb bytes.Buffer
	code := run(ctx, []string{"-project", "p", "-instance", "i", "-schema", schemaPath, "read", "-json", "users"}, strings.NewReader(""), &failingWriter{n: 1}, &errb)
	assert.Equal(t, exitError, code, errb.String())
	assert.Contains(t, errb.String(), `row "b": disk full (the rows after it were not shown)`)
}

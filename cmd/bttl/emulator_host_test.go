package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// BIGTABLE_EMULATOR_HOST may carry a scheme (http://, https://,
// passthrough:///), which the Bigtable client strips before dialling
// (internal/option/option.go, v1.58.0) and the endpoint probe strips too:
// bttl, which dials the emulator itself to install its interceptors, must
// reach the same server.
func TestEmulatorHostWithSchemeAsTheClientTakesIt(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "users", ColumnFamilies: map[string]bigtable.Family{
		"session": {}, "doc": {}, "raw": {},
	}}))
	m := bigtable.NewMutation()
	m.Set("session", "tok", bigtable.Time(time.Now().Add(time.Hour)).TruncateToMilliseconds(), []byte("x"))
	require.NoError(t, dc.Open("users").Apply(ctx, "a", m))
	schemaPath := writeFile(t, "schema.yaml", lookupSchemaYAML)
	for _, host := range []string{addr, "http://" + addr, "https://" + addr, "passthrough:///" + addr} {
		r := bttl(t, host, "", "-timeout", "10s", "-schema", schemaPath, "read", "-json", "users")
		require.Equal(t, exitOK, r.code, "BIGTABLE_EMULATOR_HOST=%s: %s", host, r.stderr)
		assert.True(t, strings.HasPrefix(r.stdout, `{"row":"a"`), "BIGTABLE_EMULATOR_HOST=%s: %s", host, r.stdout)
	}
}

package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A library error that crosses packages (scan's checkpoint refusal, inside
// audit) is printed after the command's own "bttl audit: ", without a
// second prefix (docs/design.md#errors). Resuming with other filters
// (-bytes, which keeps values on the server or not) is refused: the
// checkpoint records the scan's filters.
func TestLibraryErrorsShowOnePrefix(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "t", ColumnFamilies: map[string]bigtable.Family{
		"clicks": {GCPolicy: bigtable.MaxAgePolicy(48 * time.Hour)},
	}}))
	loadCells(t, dc, "t", "clicks", 10, 2, bigtable.Now().TruncateToMilliseconds())
	schema := writeFile(t, "s.yaml", "tables: {t: {clicks: {strategy: default-expiry, ttl: 48h}}}\n")
	ck := filepath.Join(t.TempDir(), "ck.json")
	now := time.Now().UTC()
	audit := func(at time.Time, extra ...string) result {
		return bttl(t, addr, "", append([]string{"-schema", schema, "audit", "-now", at.Format(time.RFC3339), "-checkpoint", ck}, extra...)...)
	}
	r := audit(now)
	require.Equal(t, exitOK, r.code, r.stderr)

	for name, r := range map[string]result{
		"another -now":   audit(now.Add(time.Hour)),
		"another -bytes": audit(now, "-bytes"),
	} {
		assert.Equal(t, exitError, r.code, "%s: %s", name, r.stderr)
		assert.True(t, strings.HasPrefix(r.stderr, "bttl audit: "), "%s: %s", name, r.stderr)
		assert.Contains(t, r.stderr, "scan checkpoint", name)
		assert.NotContains(t, r.stderr, "bttl: ", "%s: the library's prefix is dropped after the command's", name)
		assert.Equal(t, 1, strings.Count(r.stderr, "bttl"), "%s: %s", name, r.stderr)
	}
}

package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// After a clean in-place migrate to one-second expiry, with a live bttl writer
// whose cells expire every second and moved cells whose new expiry passes one
// after another, `bttl plan` (apply's dry run) and `bttl apply` exit 0 without
// -force when given the migration's -written-before (cells stamped after it,
// at or before now, are expiry instants already passed), while a table holding
// real legacy cells is still refused with the same flags. Without
// -written-before the same apply refuses: a timestamp alone cannot tell them
// apart (issue 35, item 3).
func TestApplyConvergesAfterACleanMigrate(t *testing.T) {
	migrateServers(t, func(t *testing.T, ac *bigtable.AdminClient, dc *bigtable.Client, addr string) {
		ctx := context.Background()
		createLegacy(t, ac)
		require.NoError(t, ac.CreateTable(ctx, "untouched"))
		require.NoError(t, ac.CreateColumnFamily(ctx, "untouched", "f"))
		switched := time.Now().Add(-2 * time.Second) // every writer switched then
		window := []string{"-written-before", switched.UTC().Format(time.RFC3339Nano), "-clock-skew", "500ms"}

		// A legacy writer's cells, one every 500ms up to a second before
		// the switch, in both tables.
		const legacyCells = 60
		oldest := bigtable.Time(switched.Add(-time.Second - (legacyCells-1)*500*time.Millisecond)).TruncateToMilliseconds()
		for _, table := range []string{"legacy", "untouched"} {
			for i := 0; i < legacyCells; i++ {
				m := bigtable.NewMutation()
				m.Set("f", "c", bigtable.Time(switched.Add(-time.Second-time.Duration(i)*500*time.Millisecond)).TruncateToMilliseconds(), []byte("legacy"))
				require.NoError(t, dc.Open(table).Apply(ctx, fmt.Sprintf("legacy#%02d", i), m))
			}
		}

		// The live writer, switched: through bttl, TTLs of 1ms to 1s.
		schema := strategy.Schema{"f": strategy.OneSecond()}
		live, err := ttlclient.Wrap(dc).Open(ctx, "legacy", schema, ttlclient.WithoutVerify())
		require.NoError(t, err)
		wctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var written int
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for k := 0; ; k++ {
				m := ttlclient.NewMutation()
				m.SetTTL("f", "c", time.Duration(k%1000+1)*time.Millisecond, []byte("live"))
				if live.Apply(wctx, fmt.Sprintf("live#%02d", k%20), m) == nil {
					written++
				}
				select {
				case <-wctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
		defer func() { stop(); wg.Wait() }()

		// The TTL puts the first moved cell's expiry 5s from now, the
		// others 500ms apart after it: none expired when migrate moves
		// them, then one expiring every 500ms.
		ttl := time.Since(oldest.Time()).Round(time.Millisecond) + 5*time.Second
		file := writeFile(t, "s.yaml", "tables: {legacy: {f: {strategy: one-second}}, untouched: {f: {strategy: one-second}}}\n")
		args := append([]string{"-schema", file, "migrate", "-table", "legacy", "-family", "f", "-from", "real", "-ttl", ttl.String(), "-first-switch", switched.UTC().Format(time.RFC3339Nano)}, window...)
		r := bttl(t, addr, "", args...)
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stdout, fmt.Sprintf("%d cell(s) moved to their new timestamp", legacyCells), "a clean migrate: every legacy cell moved")
		firstExpiry := oldest + bigtable.Timestamp(ttl/time.Microsecond)

		// The system clock is the command's (apply takes no clock): wait
		// for the first moved cells' expiry to pass, as an operator's
		// apply comes after it.
		time.Sleep(time.Until(firstExpiry.Time().Add(1500 * time.Millisecond)))
		now := bigtable.Now()
		movedPassed := 0
		for k := range storedFamily(t, dc, "legacy", "f") {
			if strings.HasPrefix(k.row, "legacy#") && k.ts <= now {
				movedPassed++
			}
		}
		require.Positive(t, movedPassed, "moved cells whose new expiry has passed")

		r = bttl(t, addr, "", "-schema", file, "apply", "-yes", "-table", "legacy")
		require.Equal(t, exitFindings, r.code, "without -written-before, passed expiries look like real timestamps: %s", r.stdout+r.stderr)
		assert.Contains(t, r.stdout, "-written-before", "the refusal names the evidence that would tell them apart")

		r = bttl(t, addr, "", append([]string{"-schema", file, "plan", "-table", "legacy", "-family", "f"}, window...)...)
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stdout, "expiry instants already passed")
		r = bttl(t, addr, "", append([]string{"-schema", file, "apply", "-yes", "-table", "legacy", "-family", "f"}, window...)...)
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stdout, "expiry instants already passed")
		assert.NotContains(t, r.stdout+r.stderr, "force")
		r = bttl(t, addr, "", "-schema", file, "verify", "-table", "legacy")
		require.Equal(t, exitOK, r.code, r.stdout+r.stderr)

		// Real legacy cells are still refused, whatever -written-before.
		r = bttl(t, addr, "", append([]string{"-schema", file, "apply", "-yes", "-table", "untouched", "-family", "f"}, window...)...)
		require.Equal(t, exitFindings, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stdout, fmt.Sprintf("%d cell(s) with timestamps at or before now", legacyCells))
		stop()
		wg.Wait()
		t.Logf("live writer: %d writes; %d moved cell(s) expired before apply", written, movedPassed)
	})
}

// -written-before states when the writers of one migrated family switched:
// given to an apply of the whole schema it would also count as expiry
// instants the real timestamps of a family whose legacy writers never
// switched (here every cell of "other" is stamped after the instant, so
// nothing was refused and the one-second rule collected them all). It
// needs -table and -family; nothing is changed without them.
func TestWrittenBeforeNeedsTheMigratedFamily(t *testing.T) {
	ac, dc, addr := serverClients(t, "bttest")
	ctx := context.Background()
	for _, table := range []string{"migrated", "other"} {
		require.NoError(t, ac.CreateTable(ctx, table))
		require.NoError(t, ac.CreateColumnFamily(ctx, table, "f"))
	}
	switched := time.Now().Add(-time.Hour) // "migrated"'s writers switched then
	m := bigtable.NewMutation()
	m.Set("f", "c", bigtable.Time(time.Now().Add(-time.Minute)).TruncateToMilliseconds(), []byte("legacy, live"))
	require.NoError(t, dc.Open("other").Apply(ctx, "r", m))
	before, err := ac.TableInfo(ctx, "other")
	require.NoError(t, err)
	file := writeFile(t, "s.yaml", "tables: {migrated: {f: {strategy: one-second}}, other: {f: {strategy: one-second}}}\n")
	window := []string{"-written-before", switched.UTC().Format(time.RFC3339Nano)}
	for _, cmd := range []string{"plan", "apply"} {
		for _, sel := range [][]string{nil, {"-table", "migrated"}, {"-family", "f"}} {
			args := append(append([]string{"-schema", file, cmd}, sel...), window...)
			if cmd == "apply" {
				args = append(args, "-yes")
			}
			r := bttl(t, addr, "", args...)
			require.Equal(t, exitError, r.code, "%v: %s", args, r.stdout+r.stderr)
			assert.Contains(t, r.stderr, "-written-before needs -table and -family", "%v", args)
		}
	}
	after, err := ac.TableInfo(ctx, "other")
	require.NoError(t, err)
	assert.Equal(t, before.FamilyInfos, after.FamilyInfos, "the family whose writers never switched keeps its rule")
	assert.Len(t, storedFamily(t, dc, "other", "f"), 1)

	r := bttl(t, addr, "", append([]string{"-schema", file, "apply", "-yes", "-table", "migrated", "-family", "f"}, window...)...)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
}

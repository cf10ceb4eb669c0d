package main

import (
	"context"
	"strings"
	"testing"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two families refused at once: provision returns one *AdoptionError per
// finding, joined (PlanAndCheck nests that join in another, with the
// change stream's refusal), and plan, apply and verify mark each "!" on
// its own line, as "apply will refuse the change(s) marked ! above" says.
// Before, plan and apply printed the join as one error: the second
// family's refusal came out unmarked.
func TestEveryRefusalIsMarked(t *testing.T) {
	ac, dc, addr := newServer(t)
	ctx := context.Background()
	require.NoError(t, ac.CreateTableFromConf(ctx, &bigtable.TableConf{TableID: "two", ColumnFamilies: map[string]bigtable.Family{
		"a": {GCPolicy: bigtable.MaxVersionsPolicy(3)},
		"b": {GCPolicy: bigtable.MaxVersionsPolicy(3)},
	}}))
	m := bigtable.NewMutation()
	m.Set("a", "c", bigtable.Now(), []byte("real")) // real timestamps: sequence would hide them
	m.Set("b", "c", bigtable.Now(), []byte("real"))
	require.NoError(t, dc.Open("two").Apply(ctx, "r", m))
	schema := writeFile(t, "two.yaml", "tables:\n  two:\n    a: {strategy: sequence, versions: 3}\n    b: {strategy: sequence, versions: 3}\n")

	refusals := func(out string) (marked, unmarked []string) {
		for _, line := range strings.Split(out, "\n") {
			if !strings.Contains(line, "the family holds timestamps that are not sequence numbers") {
				continue
			}
			if strings.HasPrefix(line, "  ! bttl: ") {
				marked = append(marked, line)
			} else {
				unmarked = append(unmarked, line)
			}
		}
		return marked, unmarked
	}
	for _, cmd := range [][]string{{"verify"}, {"plan"}, {"apply", "-yes"}} {
		r := bttl(t, addr, "", append([]string{"-schema", schema}, cmd...)...)
		assert.Equal(t, exitFindings, r.code, "%v: %s%s", cmd, r.stdout, r.stderr)
		marked, unmarked := refusals(r.stdout)
		assert.Len(t, marked, 2, "%v: one marked line per refused family:\n%s", cmd, r.stdout)
		assert.Empty(t, unmarked, "%v: no refusal printed unmarked:\n%s", cmd, r.stdout)
	}
}

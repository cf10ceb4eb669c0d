package ttlclient_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bttl/bttl/ttlclient"
)

// The protos each Apply and ApplyBulk row is checked with are scratch
// reused across calls (internal/rules.OpProtos): writers on many
// goroutines, each row with its own qualifiers, sequence numbers and
// values, each store exactly their own cells, and a refused row's error
// names its own qualifier. (Scratch shared between goroutines fails it
// under -race, as CI runs it.)
func TestConcurrentWritesStoreTheirOwnCells(t *testing.T) {
	e := newEnvNoGC(t, mixedSchema())
	const writers, rows = 6, 20
	var wg sync.WaitGroup
	mutation := func(w, r int) *ttlclient.Mutation {
		m := ttlclient.NewMutation()
		for c := 0; c <= (w+r)%5; c++ { // rows of 1 to 5 changes
			v := []byte(fmt.Sprintf("w%d-r%d-c%d", w, r, c))
			m.SetVersion(famSeq, fmt.Sprintf("q%d-%d", w, c), int64(r+1), v)
			m.Set(famPlain, fmt.Sprintf("p%d-%d-%d", w, r, c), 1000, v)
		}
		return m
	}
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys := make([]string, 0, rows)
			muts := make([]*ttlclient.Mutation, 0, rows)
			for r := 0; r < rows; r++ {
				row := fmt.Sprintf("w%d-r%02d", w, r)
				if w%2 == 0 {
					assert.NoError(t, e.tbl.Apply(e.ctx, row, mutation(w, r)))
				} else {
					keys, muts = append(keys, row), append(muts, mutation(w, r))
				}
				bad := ttlclient.NewMutation()
				bad.SetTTL(famSeq, fmt.Sprintf("bad-w%d-r%d", w, r), time.Hour, []byte("x")) // a TTL on a sequence family
				err := e.tbl.Apply(e.ctx, row, bad)
				var ce *ttlclient.CellError
				if assert.ErrorAs(t, err, &ce) {
					assert.Equal(t, fmt.Sprintf("bad-w%d-r%d", w, r), ce.Column)
				}
			}
			if len(keys) > 0 {
				errs, err := e.tbl.ApplyBulk(e.ctx, keys, muts)
				assert.NoError(t, err)
				assert.Nil(t, errs)
			}
		}()
	}
	wg.Wait()
	for w := 0; w < writers; w++ {
		for r := 0; r < rows; r++ {
			var want []string
			for c := 0; c <= (w+r)%5; c++ {
				v := fmt.Sprintf("w%d-r%d-c%d", w, r, c)
				want = append(want,
					fmt.Sprintf("%s:q%d-%d@%d=%s", famSeq, w, c, bigtable.Timestamp((r+1)*1000), v),
					fmt.Sprintf("%s:p%d-%d-%d@1000=%s", famPlain, w, r, c, v))
			}
			require.ElementsMatch(t, want, e.stored(t, fmt.Sprintf("w%d-r%02d", w, r)), "writer %d row %d", w, r)
		}
	}
}

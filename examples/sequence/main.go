// Command sequence keeps the last N revisions of a document with
// sequence-numbered versions: the family's GC rule is max versions N and a
// revision's timestamp is its sequence number times 1000, so "latest" means
// "highest revision", not "last to arrive".
//
// Sequence numbers must be unique per column or two revisions overwrite each
// other. With concurrent writers they are allocated by an atomic increment
// (ReadModifyWrite) on a counter cell in an unmanaged family of the same row;
// a caller that already has a version (from an upstream system, say) passes it
// with ttlclient.WithSequence instead.
//
//	go run ./examples/sequence
//
// With BIGTABLE_EMULATOR_HOST set it uses that emulator.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sort"
	"sync"

	"cloud.google.com/go/bigtable"

	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

func main() {
	log.SetOutput(io.Discard) // the emulator logs every GC pass
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sequence:", err)
		os.Exit(1)
	}
}

const (
	table    = "documents"
	revs     = "rev"  // Sequence(keep): the revisions
	meta     = "meta" // unmanaged: the sequence counter
	counter  = "next-seq"
	doc      = "doc#readme"
	keep     = 3
	writers  = 4
	perWrite = 3
)

func run(ctx context.Context, out io.Writer) error {
	h, err := bttestharness.Start(ctx)
	if err != nil {
		return err
	}
	defer h.Close()

	schema := ttlclient.Schema{
		revs: strategy.Sequence(keep),
		meta: strategy.Unmanaged(),
	}
	tbl, err := h.Table(ctx, table, schema)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "family %q: %s, GC rule %s; family %q: unmanaged counter\n\n", revs, schema[revs], schema[revs].GCPolicy(), meta)

	// Several writers save revisions concurrently; each allocates its
	// sequence number first.
	var (
		mu        sync.Mutex
		allocated []int64
		wg        sync.WaitGroup
		errs      = make(chan error, writers*perWrite)
	)
	for w := 1; w <= writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWrite; i++ {
				seq, err := saveRevision(ctx, tbl, fmt.Sprintf("edit %d by writer %d", i, w))
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				allocated = append(allocated, seq)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	sort.Slice(allocated, func(i, j int) bool { return allocated[i] < allocated[j] })
	fmt.Fprintf(out, "%d writers x %d saves allocated sequence numbers %v\n", writers, perWrite, allocated)
	fmt.Fprintf(out, "allocated %d distinct sequence numbers 1..%d: %t\n",
		len(allocated), writers*perWrite, distinctRun(allocated))

	r, err := tbl.ReadRow(ctx, doc, bigtable.RowFilter(bigtable.FamilyFilter("^"+revs+"$")))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "read through bttl: %d revisions: %v\n", len(r[revs]), seqs(r[revs]))
	stored, err := h.Stored(ctx, table, doc)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "physically stored right now: %d revisions (GC trims to the %d highest on its own schedule)\n", len(stored[revs]), keep)

	// A late writer with a lower version does not become "latest".
	late := ttlclient.NewMutation()
	late.SetVersion(revs, "body", 2, []byte("replayed old edit"))
	if err := tbl.Apply(ctx, doc, late); err != nil {
		return err
	}
	r, err = tbl.ReadRow(ctx, doc, bigtable.RowFilter(bigtable.ChainFilters(
		bigtable.FamilyFilter("^"+revs+"$"), bigtable.LatestNFilter(1))))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "after a late write of revision 2, the latest is still revision %d\n", r[revs][0].Timestamp/1000)

	fmt.Fprintln(out, "\nguardrails:")
	bad := ttlclient.NewMutation()
	bad.SetVersion(revs, "body", 0, []byte("x"))
	err = tbl.Apply(ctx, doc, bad)
	fmt.Fprintf(out, "  sequence 0: refused=%t: %v\n", errors.Is(err, strategy.ErrInvalidSequence), err)
	noSeq := ttlclient.NewMutation()
	noSeq.Set(revs, "body", bigtable.ServerTime, []byte("x"))
	err = tbl.Apply(ctx, doc, noSeq)
	fmt.Fprintf(out, "  no sequence:  refused=%t: %v\n", errors.Is(err, strategy.ErrServerTimestamp), err)
	rmw := ttlclient.NewReadModifyWrite()
	rmw.Increment(revs, "body", 1)
	_, err = tbl.ApplyReadModifyWrite(ctx, doc, rmw)
	fmt.Fprintf(out, "  increment on the sequence family: refused=%t: %v\n", errors.Is(err, ttlclient.ErrServerAssignedTimestamp), err)
	return nil
}

// saveRevision allocates the next sequence number of doc atomically, then
// writes the revision under it. Two writers never get the same number, so no
// revision overwrites another; a revision allocated but never written (a
// crash between the two calls) leaves a gap, which is harmless.
func saveRevision(ctx context.Context, tbl *ttlclient.Table, body string) (int64, error) {
	inc := ttlclient.NewReadModifyWrite()
	inc.Increment(meta, counter, 1)
	r, err := tbl.ApplyReadModifyWrite(ctx, doc, inc)
	if err != nil {
		return 0, err
	}
	seq := int64(binary.BigEndian.Uint64(r[meta][0].Value))

	m := ttlclient.NewMutation()
	m.SetVersion(revs, "body", seq, []byte(body))
	return seq, tbl.Apply(ctx, doc, m)
}

func seqs(items []bigtable.ReadItem) []int64 {
	var s []int64
	for _, it := range items {
		s = append(s, int64(it.Timestamp/1000))
	}
	return s
}

func distinctRun(s []int64) bool {
	for i, v := range s {
		if v != int64(i+1) {
			return false
		}
	}
	return true
}

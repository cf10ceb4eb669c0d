package ttlclient_test

import (
	"testing"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
)

// apiMutation is benchMutation's cells as a plain-client program writes
// them for bttl: a *bigtable.Mutation whose timestamp comes from
// Table.Timestamp (age families) or is seq*1000 (sequence).
func (e *benchEnv) apiMutation(b *testing.B) *bigtable.Mutation {
	var ts bigtable.Timestamp = 7000
	if e.s.policy.Kind() != strategy.KindSequence {
		ttl := time.Hour
		if e.s.policy.Kind() == strategy.KindDefaultExpiry {
			ttl = 30 * time.Minute
		}
		var err error
		if ts, err = e.ttl.Timestamp(benchFam, ttl); err != nil {
			b.Fatal(err)
		}
	}
	m := bigtable.NewMutation()
	for _, c := range benchColumns {
		m.Set(benchFam, c, ts, benchValue)
	}
	return m
}

// BenchmarkTableAPIApply: the TableAPI path (impl=api) against the
// ttlclient.Mutation path (impl=ttl), one row of 10 cells, the mutation
// built inside the loop on both sides. -count interleaves the pair.
func BenchmarkTableAPIApply(b *testing.B) {
	forEachStrategy(b, func(b *testing.B, s benchStrategy) {
		e := newBenchEnv(b, s)
		api := e.ttl.API()
		b.Run("impl=ttl", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := e.ttl.Apply(e.ctx, rowKey("apply", i%1000), e.ttlMutation()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("impl=api", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := api.Apply(e.ctx, rowKey("apply", i%1000), e.apiMutation(b)); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkTableAPIApplyBulk: 100 rows x 10 cells per call, as
// BenchmarkTableAPIApply.
func BenchmarkTableAPIApplyBulk(b *testing.B) {
	forEachStrategy(b, func(b *testing.B, s benchStrategy) {
		e := newBenchEnv(b, s)
		api := e.ttl.API()
		const rows = 100
		keys := make([]string, rows)
		for i := range keys {
			keys[i] = rowKey("bulk", i)
		}
		b.Run("impl=ttl", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				muts := make([]*ttlclient.Mutation, rows)
				for i := range muts {
					muts[i] = e.ttlMutation()
				}
				if errs, err := e.ttl.ApplyBulk(e.ctx, keys, muts); err != nil || errs != nil {
					b.Fatal(err, errs)
				}
			}
		})
		b.Run("impl=api", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				muts := make([]*bigtable.Mutation, rows)
				for i := range muts {
					muts[i] = e.apiMutation(b)
				}
				if errs, err := api.ApplyBulk(e.ctx, keys, muts); err != nil || errs != nil {
					b.Fatal(err, errs)
				}
			}
		})
	})
}

// BenchmarkTableAPIBuild: the work before the RPC only, without the
// caller's build of the Mutation or the server: stamping its changes and
// building the bigtable.Mutation sent with the client's own methods (the
// client's build of those cells included). impl=ttl builds a fresh
// Mutation each time (made in batches with the timer stopped),
// impl=ttl-again the same one again: nothing is kept from one Apply to the
// next, so the two should cost the same. Table.API's writes have no
// build of bttl's (they are rewritten on the wire).
func BenchmarkTableAPIBuild(b *testing.B) {
	forEachStrategy(b, func(b *testing.B, s benchStrategy) {
		e := newBenchEnv(b, s)
		tm := e.ttlMutation()
		_ = e.apiMutation(b)
		b.Run("impl=ttl", func(b *testing.B) {
			b.ReportAllocs()
			fresh := make([]*ttlclient.Mutation, 1024)
			next := len(fresh)
			for b.Loop() {
				if next == len(fresh) {
					b.StopTimer()
					for i := range fresh {
						fresh[i] = e.ttlMutation()
					}
					next = 0
					b.StartTimer()
				}
				if _, err := e.ttl.Build("row", fresh[next]); err != nil {
					b.Fatal(err)
				}
				next++
			}
		})
		b.Run("impl=ttl-again", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.ttl.Build("row", tm); err != nil {
					b.Fatal(err)
				}
			}
		})

	})
}

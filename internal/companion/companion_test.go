package companion_test

import (
	"testing"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"

	"github.com/bttl/bttl/internal/companion"
	"github.com/bttl/bttl/strategy"
)

func TestClassify(t *testing.T) {
	it := func(q string, ts bigtable.Timestamp) bigtable.ReadItem {
		return bigtable.ReadItem{Row: "r", Column: "f:" + q, Timestamp: ts}
	}
	assert.Nil(t, companion.Classify("f", []bigtable.ReadItem{it("a", 1000), it("b", 2000)}), "no reserved qualifier: all data, nil")
	items := []bigtable.ReadItem{
		it("a", 2000),
		it("a", 1000),
		it(strategy.WriteTimeColumn("a"), 2000),              // companion of a@2000
		it(strategy.WriteTimeColumn("a"), 3000),              // orphan: no a@3000
		it(strategy.WriteTimeColumn("b"), 1000),              // orphan: no column b
		it("\xff\xfflegacy", 1000),                           // a column written before the option
		it(strategy.WriteTimeColumn("\xff\xfflegacy"), 1000), // companion of a reserved column: none is
		it(strategy.WriteTimeColumn("a")+"\x00extra", 1000),  // companion of "a\x00extra", absent
	}
	assert.Equal(t, []companion.Kind{
		companion.Data, companion.Data, companion.Companion, companion.Hidden, companion.Hidden,
		companion.Hidden, companion.Hidden, companion.Hidden,
	}, companion.Classify("f", items))
}

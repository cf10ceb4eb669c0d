// Package auditrule is the one rule by which an audit tells an age
// family's expired cells that GC will collect from cells its current rule
// keeps (docs/design.md#not-on-rule), for audit's report and the CLI's
// lookup, which must classify a cell alike.
package auditrule

import (
	adminpb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"

	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/strategy"
)

// CollectsExpired reports whether the family's GC rule, even when not the
// one the age policy p needs, collects every cell that one would (an age
// as short or shorter, in a union: a versions rule beside it, say): then
// the cells p reads as expired are GC's stock all the same, not cells kept
// by the family's rule.
func CollectsExpired(cf *adminpb.ColumnFamily, p strategy.Policy) bool {
	if k := p.Kind(); k != strategy.KindOneSecond && k != strategy.KindDefaultExpiry {
		return false
	}
	n := gcrule.Normalize(cf.GetGcRule())
	return !n.Intersection && !n.Unrecognized && n.HasAge && n.Age <= p.MaxAge()
}

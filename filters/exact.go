package filters

import (
	"sort"
	"time"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"

	"github.com/bttl/bttl/strategy"
)

// exactForm is the TTL filter of a table whose families are known
// (WithFamilies). Families that share a rule share a branch, and every
// family is selected by name with a column range, so there is no regex:
//
//	rule                                   // one rule covers every family
//	Interleave(
//	    Chain(Family(a), rule_a),          // a family alone with its rule
//	    Chain(Interleave(Family(b), Family(c)), rule_bc),  // b and c share a rule
//	    Family(u), ...                     // unmanaged families, untouched
//	)
//
// where rule is TimestampRange[liveFrom, inf) for an age rule (chained with
// CellsPerColumn(N) when it has a max-versions limit) and CellsPerColumn(N)
// for a sequence rule.
type exactForm struct {
	branches []exactBranch // managed rules by first family name, then unmanaged families by name
	slots    int           // filters one build needs: the interleave's and every age chain's
}

type exactBranch struct {
	names    []string        // the families the branch selects
	sel      bigtable.Filter // selects names; nil when the branch is the whole filter
	policy   strategy.Policy // the rule (any family of the branch); unmanaged: the zero policy
	perCol   bigtable.Filter // cells-per-column limit of an age rule, nil when none
	constant bigtable.Filter // the whole branch when it does not change with time
}

// ruleKey identifies a read rule: families whose keys are equal get the same
// filter at every read time.
type ruleKey struct {
	kind      strategy.Kind
	age       time.Duration // D of default expiry; 0 for one-second (its bound is the read time)
	versions  int
	writeTime bool // companions hidden: a different selection
}

func keyOf(p strategy.Policy) ruleKey {
	return ruleKey{kind: p.Kind(), age: p.ExpiryOffset(), versions: p.VersionLimit(), writeTime: p.HasCompanions()}
}

func newExactForm(schema strategy.Schema, families []string) *exactForm {
	known := map[string]bool{}
	for _, f := range families {
		known[f] = true
	}
	for f := range schema {
		known[f] = true
	}
	rules := map[ruleKey][]string{}
	var unmanaged []string
	for f := range known {
		if p := schema[f]; p.Managed() {
			rules[keyOf(p)] = append(rules[keyOf(p)], f)
		} else {
			unmanaged = append(unmanaged, f)
		}
	}
	groups := make([][]string, 0, len(rules))
	for _, names := range rules {
		sort.Strings(names)
		groups = append(groups, names)
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i][0] < groups[j][0] })
	sort.Strings(unmanaged)

	x := &exactForm{}
	alone := len(groups) == 1 && len(unmanaged) == 0
	for _, names := range groups {
		p := schema[names[0]]
		br := exactBranch{names: names, policy: p}
		if !alone || p.HasCompanions() {
			br.sel = selectFamilies(names, p.HasCompanions())
		}
		if p.Kind() == strategy.KindSequence {
			br.constant = chainOrOne(br.sel, bigtable.LatestNFilter(p.VersionLimit()))
		} else {
			if p.VersionLimit() > 0 {
				br.perCol = bigtable.LatestNFilter(p.VersionLimit())
			}
			x.slots += 3 // selection, range, limit at most
		}
		x.branches = append(x.branches, br)
	}
	for _, u := range unmanaged {
		x.branches = append(x.branches, exactBranch{names: []string{u}, constant: familyOnly(u)})
	}
	x.slots += len(x.branches)
	return x
}

// selectFamilies passes every cell of the named families and no other.
func selectFamilies(names []string, hide bool) bigtable.Filter {
	if len(names) == 1 {
		return familySelect(names[0], hide)
	}
	fs := make([]bigtable.Filter, len(names))
	for i, n := range names {
		fs[i] = familySelect(n, hide)
	}
	return bigtable.InterleaveFilters(fs...)
}

func chainOrOne(sel, f bigtable.Filter) bigtable.Filter {
	if sel == nil {
		return f
	}
	return bigtable.ChainFilters(sel, f)
}

// build makes the filter for read time now: one array backs every filter
// list, and each age rule adds its range and chain.
func (x *exactForm) build(now bigtable.Timestamp) bigtable.Filter {
	buf := make([]bigtable.Filter, x.slots)
	n := len(x.branches)
	subs, rest := buf[:0:n], buf[n:]
	for i := range x.branches {
		br := &x.branches[i]
		if br.constant != nil {
			subs = append(subs, br.constant)
			continue
		}
		if now >= strategy.MaxTimestamp && br.policy.AllExpired(now) {
			continue // no cell of the rule can be live: the branch passes nothing
		}
		parts := rest[:0:3]
		rest = rest[3:]
		if br.sel != nil {
			parts = append(parts, br.sel)
		}
		parts = append(parts, bigtable.TimestampRangeFilterMicros(br.policy.LiveFrom(now), 0))
		if br.perCol != nil {
			parts = append(parts, br.perCol)
		}
		if len(parts) == 1 {
			subs = append(subs, parts[0])
		} else {
			subs = append(subs, bigtable.ChainFilters(parts...))
		}
	}
	switch len(subs) {
	case 0:
		return bigtable.BlockAllFilter()
	case 1:
		return subs[0]
	}
	return bigtable.InterleaveFilters(subs...)
}

// proto is build(now) as the proto the client sends for it, node for node.
func (x *exactForm) proto(now bigtable.Timestamp) *btpb.RowFilter {
	subs := make([]*btpb.RowFilter, 0, len(x.branches))
	for i := range x.branches {
		br := &x.branches[i]
		var parts []*btpb.RowFilter
		if br.sel != nil {
			parts = append(parts, selectFamiliesProto(br.names, br.policy.HasCompanions()))
		}
		switch {
		case !br.policy.Managed():
			// An unmanaged family: its selection is the branch.
		case br.policy.Kind() == strategy.KindSequence:
			parts = append(parts, cellsPerColumnProto(br.policy.VersionLimit()))
		case now >= strategy.MaxTimestamp && br.policy.AllExpired(now):
			continue // as in build
		default:
			parts = append(parts, rangeProto(br.policy.LiveFrom(now), 0))
			if br.perCol != nil {
				parts = append(parts, cellsPerColumnProto(br.policy.VersionLimit()))
			}
		}
		if !br.policy.Managed() {
			parts = append(parts, familyOnlyProto(br.names[0]))
		}
		if len(parts) == 1 {
			subs = append(subs, parts[0])
		} else {
			subs = append(subs, chainProto(parts...))
		}
	}
	switch len(subs) {
	case 0:
		return &btpb.RowFilter{Filter: &btpb.RowFilter_BlockAllFilter{BlockAllFilter: true}}
	case 1:
		return subs[0]
	}
	return interleaveProto(subs...)
}

func selectFamiliesProto(names []string, hide bool) *btpb.RowFilter {
	if len(names) == 1 {
		return familySelectProto(names[0], hide)
	}
	fs := make([]*btpb.RowFilter, len(names))
	for i, n := range names {
		fs[i] = familySelectProto(n, hide)
	}
	return interleaveProto(fs...)
}

func interleaveProto(fs ...*btpb.RowFilter) *btpb.RowFilter {
	return &btpb.RowFilter{Filter: &btpb.RowFilter_Interleave_{Interleave: &btpb.RowFilter_Interleave{Filters: fs}}}
}

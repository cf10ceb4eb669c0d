package filters

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/strategy"
)

// Builder makes the read filters of one table's schema. Everything that does
// not depend on the read time (family regexes, sequence branches, the
// branch for unmanaged families) is built once by New; a read only fills in
// the age families' timestamp bounds, and reads in the same millisecond
// share one filter.
type Builder struct {
	branches       []branch
	hasAge         bool
	ageOnly        bool            // every managed family expires by age alone: the split form applies
	slots          int             // filters one time bound needs: the interleave's and every age chain's
	static         bigtable.Filter // the whole TTL filter when no branch depends on time
	unmanaged      bigtable.Filter // passes every family the schema does not manage
	unmanagedRegex string          // its pattern, for TTLProto
	exact          *exactForm      // the table's families are known: no regex (see WithFamilies)
	cache          atomic.Pointer[cachedFilter]
}

// Option adjusts New.
type Option func(*options)

type options struct {
	families []string
	known    bool
}

// WithFamilies gives New every column family the table has (as read from
// the table, when it was opened): the TTL filter then selects families by
// name (ColumnRangeFilter, no regex), merges families that share a rule into
// one branch, and is a bare TimestampRange or CellsPerColumn limit when one
// rule covers every family. The schema's families count as known whether or
// not they are listed.
//
// A family missing from names (one created after the list was read) is not
// in the filter: reads return none of its cells, except when one rule
// covers every known family, where the filter selects no family and the new
// family's cells are filtered by that rule. It never makes a read return an
// expired cell of a schema family. Without this option the families are
// unknown and every family outside the schema is read untouched, through a
// complement regex (ComplementRegex).
func WithFamilies(names []string) Option {
	return func(o *options) {
		o.families = append(o.families[:0:0], names...)
		o.known = true
	}
}

type branch struct {
	name     string // the family's name, for TTLProto
	family   bigtable.Filter
	policy   strategy.Policy
	perCol   bigtable.Filter // cells-per-column limit, nil when none
	constant bigtable.Filter // the whole branch, for sequence families
}

type cachedFilter struct {
	milli int64
	f     bigtable.Filter
}

// New validates schema and prepares its filters. A schema with an
// intersection rule cannot be expressed: schemas here are built from
// strategy policies, which never produce one.
func New(schema strategy.Schema, opts ...Option) (*Builder, error) {
	if err := schema.Validate(); err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var managed []string
	for fam, p := range schema {
		if p.Managed() {
			managed = append(managed, fam)
		}
	}
	sort.Strings(managed)
	b := &Builder{}
	for _, fam := range managed {
		p := schema[fam]
		// A column range with no qualifiers selects exactly the family by
		// name, with no regex: the emulators compile a family regex again
		// for every cell they test, which made filtered reads several times
		// slower than unfiltered ones.
		br := branch{name: fam, family: familySelect(fam, p.HasCompanions()), policy: p}
		if p.VersionLimit() > 0 {
			br.perCol = bigtable.LatestNFilter(p.VersionLimit())
		}
		if p.Kind() == strategy.KindSequence {
			br.constant = bigtable.ChainFilters(br.family, br.perCol)
		} else {
			b.hasAge = true
		}
		b.branches = append(b.branches, br)
		if br.constant == nil {
			b.slots += 2
			if br.perCol != nil {
				b.slots++
			}
		}
	}
	b.slots += len(b.branches) + 1
	b.ageOnly = b.hasAge
	for _, br := range b.branches {
		// The split form's first branch passes every family's recent
		// cells, write-time companions included.
		if br.constant != nil || br.perCol != nil || br.policy.HasCompanions() {
			b.ageOnly = false
		}
	}
	if len(managed) > 0 && o.known {
		b.exact = newExactForm(schema, o.families)
		if !b.hasAge {
			b.static = b.exact.build(0)
		}
		return b, nil
	}
	if len(managed) > 0 {
		b.unmanagedRegex = ComplementRegex(managed)
		b.unmanaged = bigtable.FamilyFilter(b.unmanagedRegex)
		if !b.hasAge {
			b.static = b.build(0)
		}
	}
	return b, nil
}

// Managed reports whether any family of the schema gets a TTL filter.
func (b *Builder) Managed() bool { return len(b.branches) > 0 }

// TTL is the filter that keeps exactly the cells live at read time now
// (microseconds): per managed family its own bound, unmanaged families
// untouched. It is nil when the schema manages no family.
func (b *Builder) TTL(now bigtable.Timestamp) bigtable.Filter {
	if b.static != nil || len(b.branches) == 0 {
		return b.static
	}
	milli := int64(strategy.Millis(now)) / 1000
	if c := b.cache.Load(); c != nil && c.milli == milli {
		return c.f
	}
	f := b.build(now)
	b.cache.Store(&cachedFilter{milli: milli, f: f})
	return f
}

// Compose returns the filter a read at now must send: the TTL filter first,
// then the caller's (Chain(ttl, user)), so the caller's filter never sees a
// cell a complete GC would have removed. Either may be nil; never builds a
// chain of one element, which servers refuse.
func (b *Builder) Compose(now bigtable.Timestamp, user bigtable.Filter) bigtable.Filter {
	ttl := b.TTL(now)
	switch {
	case ttl == nil:
		return user
	case user == nil:
		return ttl
	}
	return bigtable.ChainFilters(ttl, user)
}

// build makes the TTL filter for read time now. Only the age branches
// change with time, so a new bound costs one array backing every filter
// list, a range and a chain per age family, and the interleave.
func (b *Builder) build(now bigtable.Timestamp) bigtable.Filter {
	if b.exact != nil {
		return b.exact.build(now)
	}
	if b.pastEnd(now) {
		return b.buildPastEnd(now)
	}
	if split := b.split(now); split > 0 {
		return b.buildSplit(now, split)
	}
	buf := make([]bigtable.Filter, b.slots)
	n := len(b.branches) + 1
	subs, rest := buf[:0:n], buf[n:]
	for _, br := range b.branches {
		if br.constant != nil {
			subs = append(subs, br.constant)
			continue
		}
		k := 2
		if br.perCol != nil {
			k = 3
		}
		chain := rest[:k:k]
		rest = rest[k:]
		chain[0] = br.family
		chain[1] = bigtable.TimestampRangeFilterMicros(br.policy.LiveFrom(now), 0)
		if br.perCol != nil {
			chain[2] = br.perCol
		}
		subs = append(subs, bigtable.ChainFilters(chain...))
	}
	subs = append(subs, b.unmanaged)
	return bigtable.InterleaveFilters(subs...)
}

// split is the bound of the split form of the TTL filter at now, or 0 when
// the plain form applies. When every managed family expires by age alone
// (no sequence family, no max-versions limit), the filter can be split at
// the latest live-from bound L of all of them:
//
//	Interleave(
//	    TimestampRange[L, inf),                          // every family: live wherever it is
//	    Chain(Family(f), TimestampRange[liveFrom_f, L)), // per age family whose bound is below L
//	    Chain(TimestampRange[0, L), FamilyFilter(<every family but the managed ones>)),
//	)
//
// It keeps the same cells as the plain form, with disjoint branches, but the
// family regex only sees cells older than L: on the emulators, which compile
// a family regex for every cell they test, reading live managed cells then
// runs no regex at all.
func (b *Builder) split(now bigtable.Timestamp) bigtable.Timestamp {
	if !b.ageOnly || b.exact != nil {
		return 0
	}
	var hi bigtable.Timestamp
	for _, br := range b.branches {
		hi = max(hi, br.policy.LiveFrom(now))
	}
	return hi
}

// buildSplit builds the split form at bound hi (see split).
func (b *Builder) buildSplit(now, hi bigtable.Timestamp) bigtable.Filter {
	buf := make([]bigtable.Filter, 3*len(b.branches)+4)
	n := len(b.branches) + 2
	subs, rest := buf[:0:n], buf[n:]
	subs = append(subs, bigtable.TimestampRangeFilterMicros(hi, 0))
	for _, br := range b.branches {
		lo := br.policy.LiveFrom(now)
		if lo >= hi {
			continue
		}
		chain := rest[:2:2]
		rest = rest[2:]
		chain[0] = br.family
		chain[1] = bigtable.TimestampRangeFilterMicros(lo, hi)
		subs = append(subs, bigtable.ChainFilters(chain...))
	}
	old := rest[:2:2]
	old[0] = bigtable.TimestampRangeFilterMicros(0, hi)
	old[1] = b.unmanaged
	subs = append(subs, bigtable.ChainFilters(old...))
	return bigtable.InterleaveFilters(subs...)
}

// Expired is the inverse of TTL for the age families: only cells that are
// expired at now but still stored, values stripped. It is nil when no family
// expires by age. Used to measure data that GC has not collected yet.
func (b *Builder) Expired(now bigtable.Timestamp) bigtable.Filter {
	var subs []bigtable.Filter
	for _, br := range b.branches {
		if br.constant != nil {
			continue
		}
		if br.policy.AllExpired(now) {
			subs = append(subs, br.family) // past the largest timestamp: every cell
			continue
		}
		lo := br.policy.LiveFrom(now)
		if lo <= 0 {
			continue
		}
		subs = append(subs, bigtable.ChainFilters(br.family, bigtable.TimestampRangeFilterMicros(0, lo)))
	}
	switch len(subs) {
	case 0:
		return nil
	case 1:
		return bigtable.ChainFilters(subs[0], bigtable.StripValueFilter())
	}
	return bigtable.ChainFilters(bigtable.InterleaveFilters(subs...), bigtable.StripValueFilter())
}

// ReservedQualifierStart starts the qualifiers reserved in a family with
// write-time companions (strategy.WithWriteTime): the TTL filter selects
// such a family with a column range ending there, so no read through bttl
// returns a companion, and no regex is added (docs/design.md#write-time).
const ReservedQualifierStart = strategy.ReservedQualifierStart

// familySelect is familyOnly, or, for a family with write-time companions
// (hide), the family's qualifiers below ReservedQualifierStart: still a
// column range compared by name, no regex.
func familySelect(fam string, hide bool) bigtable.Filter {
	if hide {
		return bigtable.ColumnRangeFilter(fam, "", ReservedQualifierStart)
	}
	return familyOnly(fam)
}

// familyOnly is a filter passing every cell of family fam and no other:
// a column range with neither bound, which the server tests by comparing
// names, where a FamilyFilter(FamilyRegex(fam)) runs a regex.
func familyOnly(fam string) bigtable.Filter {
	return bigtable.ColumnRangeFilter(fam, "", "")
}

// FamilyRegex is an RE2 pattern matching exactly the family name fam.
func FamilyRegex(fam string) string {
	return "^" + regexp.QuoteMeta(fam) + "$"
}

// ComplementRegex is an RE2 pattern matching every family name except the
// given ones. RE2 has no negative lookahead, so the pattern spells out the
// complement of the names' trie: a name is outside the set iff it leaves the
// trie at some byte, stops at a node that ends no name, or runs past a leaf.
func ComplementRegex(names []string) string {
	root := &trieNode{}
	for _, n := range names {
		root.insert(n)
	}
	return "^(?s:" + root.complement() + ")$"
}

type trieNode struct {
	children map[byte]*trieNode
	terminal bool
}

func (n *trieNode) insert(s string) {
	for i := 0; i < len(s); i++ {
		if n.children == nil {
			n.children = map[byte]*trieNode{}
		}
		c, ok := n.children[s[i]]
		if !ok {
			c = &trieNode{}
			n.children[s[i]] = c
		}
		n = c
	}
	n.terminal = true
}

// complement matches the suffixes, after the prefix leading to n, of names
// that are not in the set.
func (n *trieNode) complement() string {
	var alts []string
	if len(n.children) == 0 {
		alts = append(alts, ".+")
	} else {
		keys := make([]byte, 0, len(n.children))
		for k := range n.children {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
		var class strings.Builder
		for _, k := range keys {
			class.WriteString(escapeByte(k))
		}
		alts = append(alts, "[^"+class.String()+"].*")
		for _, k := range keys {
			alts = append(alts, escapeByte(k)+"(?:"+n.children[k].complement()+")")
		}
	}
	s := strings.Join(alts, "|")
	if !n.terminal {
		// Stopping here is a name outside the set too.
		return "(?:" + s + ")?"
	}
	return s
}

func escapeByte(b byte) string {
	if ('a' <= b && b <= 'z') || ('A' <= b && b <= 'Z') || ('0' <= b && b <= '9') || b == '_' {
		return string(b)
	}
	if b < 0x20 || b >= 0x7f {
		return fmt.Sprintf(`\x%02x`, b)
	}
	return `\` + string(b)
}

package gcrule

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"
	adminpb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/bttl/bttl/internal/bttlerr"
	"github.com/bttl/bttl/internal/timefmt"
	"github.com/bttl/bttl/strategy"
)

// ErrMismatch: a family of the table is missing or carries a GC rule other
// than the one its policy needs. Every *MismatchError wraps it.
var ErrMismatch = errors.New("bttl: GC rule does not match the schema")

// Kind says how a family's actual rule differs from the expected one.
type Kind uint8

const (
	// MissingFamily: the schema names a family the table does not have.
	MissingFamily Kind = iota + 1
	// NoRule: a managed family without any GC rule (never collected).
	NoRule
	// WrongMaxAge: an age family whose max age differs or is absent.
	WrongMaxAge
	// WrongMaxVersions: a max-versions limit that differs, is absent, or
	// is present where the policy has none.
	WrongMaxVersions
	// AgeRuleOnSequence: a max age on a sequence family, which would
	// delete its versions by the age of their (non-time) timestamps.
	AgeRuleOnSequence
	// IntersectionRule: an intersection, which no read filter reproduces.
	IntersectionRule
	// UnrecognizedRule: a rule kind this version does not know.
	UnrecognizedRule
)

func (k Kind) String() string {
	switch k {
	case MissingFamily:
		return "missing family"
	case NoRule:
		return "no GC rule"
	case WrongMaxAge:
		return "wrong max age"
	case WrongMaxVersions:
		return "wrong max versions"
	case AgeRuleOnSequence:
		return "age rule on a sequence family"
	case IntersectionRule:
		return "intersection rule"
	case UnrecognizedRule:
		return "unrecognized rule"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// MismatchError names the table, the family, the policy, and the expected
// and actual rules (exact, sub-second ages included).
type MismatchError struct {
	Table    string
	Family   string
	Kind     Kind
	Policy   strategy.Policy
	Expected string
	Actual   string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%v: table %q, family %q (%s): %s: expected %s, actual %s",
		ErrMismatch, e.Table, e.Family, e.Policy, e.Kind, e.Expected, e.Actual)
}

// Unwrap gives ErrMismatch, and strategy.ErrUnsupportedGCRule for an
// intersection.
func (e *MismatchError) Unwrap() []error {
	if e.Kind == IntersectionRule {
		return []error{ErrMismatch, strategy.ErrUnsupportedGCRule}
	}
	return []error{ErrMismatch}
}

// Mismatches is every mismatching family of one table, sorted by family.
// errors.As finds each *MismatchError in it.
type Mismatches []*MismatchError

func (m Mismatches) Error() string {
	parts := make([]string, len(m))
	for i, e := range m {
		parts[i] = e.Error()
		if i > 0 {
			parts[i] = bttlerr.Trim(parts[i]) // one prefix, the first's
		}
	}
	return strings.Join(parts, "; ")
}

// Unwrap gives the *MismatchError values.
func (m Mismatches) Unwrap() []error {
	out := make([]error, len(m))
	for i, e := range m {
		out[i] = e
	}
	return out
}

// Expected is the GC rule proto the policy needs; nil for an unmanaged
// family (any rule is accepted). It is the policy's own rule
// (strategy.Policy.GCPolicy) as a proto, so an option that changes the
// rule changes it here too.
func Expected(p strategy.Policy) *adminpb.GcRule {
	if !p.Managed() {
		return nil
	}
	return ruleOf(p.GCPolicy())
}

// ruleOf is g as a proto, read through the bigtable client's exported
// policy types (the client's own conversion is unexported); nil for a
// policy with no rule, or of a type this package does not know.
func ruleOf(g bigtable.GCPolicy) *adminpb.GcRule {
	switch x := g.(type) {
	case bigtable.MaxAgeGCPolicy:
		return &adminpb.GcRule{Rule: &adminpb.GcRule_MaxAge{MaxAge: durationpb.New(time.Duration(x))}}
	case bigtable.MaxVersionsGCPolicy:
		return &adminpb.GcRule{Rule: &adminpb.GcRule_MaxNumVersions{MaxNumVersions: int32(x)}}
	case bigtable.UnionGCPolicy:
		rules, ok := rulesOf(x.Children)
		if !ok {
			return nil
		}
		return &adminpb.GcRule{Rule: &adminpb.GcRule_Union_{Union: &adminpb.GcRule_Union{Rules: rules}}}
	case bigtable.IntersectionGCPolicy:
		rules, ok := rulesOf(x.Children)
		if !ok {
			return nil
		}
		return &adminpb.GcRule{Rule: &adminpb.GcRule_Intersection_{Intersection: &adminpb.GcRule_Intersection{Rules: rules}}}
	}
	return nil
}

func rulesOf(gs []bigtable.GCPolicy) ([]*adminpb.GcRule, bool) {
	out := make([]*adminpb.GcRule, len(gs))
	for i, g := range gs {
		if out[i] = ruleOf(g); out[i] == nil {
			return nil, false
		}
	}
	return out, true
}

// ExpectedString describes the rule the policy needs.
func ExpectedString(p strategy.Policy) string {
	if !p.Managed() {
		return "any (unmanaged)"
	}
	return Describe(Expected(p))
}

// Describe renders a GC rule exactly, sub-second max ages included.
func Describe(r *adminpb.GcRule) string {
	if r == nil || r.Rule == nil {
		return "none (never collected)"
	}
	switch x := r.Rule.(type) {
	case *adminpb.GcRule_MaxAge:
		if err := x.MaxAge.CheckValid(); err != nil {
			return fmt.Sprintf("max_age=invalid(%v)", err)
		}
		return "max_age=" + timefmt.Duration(x.MaxAge.AsDuration()) // "60d", as schema files write it
	case *adminpb.GcRule_MaxNumVersions:
		return fmt.Sprintf("max_versions=%d", x.MaxNumVersions)
	case *adminpb.GcRule_Union_:
		return "union(" + describeAll(x.Union.GetRules()) + ")"
	case *adminpb.GcRule_Intersection_:
		return "intersection(" + describeAll(x.Intersection.GetRules()) + ")"
	}
	return fmt.Sprintf("unrecognized(%T)", r.Rule)
}

func describeAll(rs []*adminpb.GcRule) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = Describe(r)
	}
	return strings.Join(parts, ", ")
}

// Normal is a rule reduced to its meaning: a cell is collected when older
// than Age (if HasAge) or beyond the Versions newest (if HasVersions).
type Normal struct {
	HasAge       bool
	Age          time.Duration
	HasVersions  bool
	Versions     int64
	Intersection bool // an intersection anywhere: not reducible
	Unrecognized bool // a rule kind or value this package cannot read
}

// Normalize reduces r to its meaning. Unions are flattened: a union
// collects a cell when any member would, so the smallest age and the
// fewest versions win.
func Normalize(r *adminpb.GcRule) Normal {
	var n Normal
	n.add(r)
	return n
}

func (n *Normal) add(r *adminpb.GcRule) {
	if r == nil || r.Rule == nil {
		return
	}
	switch x := r.Rule.(type) {
	case *adminpb.GcRule_MaxAge:
		if x.MaxAge.CheckValid() != nil {
			n.Unrecognized = true
			return
		}
		d := x.MaxAge.AsDuration()
		if !n.HasAge || d < n.Age {
			n.HasAge, n.Age = true, d
		}
	case *adminpb.GcRule_MaxNumVersions:
		v := int64(x.MaxNumVersions)
		if !n.HasVersions || v < n.Versions {
			n.HasVersions, n.Versions = true, v
		}
	case *adminpb.GcRule_Union_:
		for _, c := range x.Union.GetRules() {
			n.add(c)
		}
	case *adminpb.GcRule_Intersection_:
		n.Intersection = true
	default:
		n.Unrecognized = true
	}
}

// Check compares family's actual column family (nil when the table has no
// such family) with policy p. It returns nil on a match.
func Check(table, family string, p strategy.Policy, actual *adminpb.ColumnFamily) *MismatchError {
	mismatch := func(k Kind) *MismatchError {
		act := "missing family"
		if actual != nil {
			act = Describe(actual.GetGcRule())
		}
		return &MismatchError{Table: table, Family: family, Kind: k, Policy: p, Expected: ExpectedString(p), Actual: act}
	}
	if actual == nil {
		return mismatch(MissingFamily)
	}
	if !p.Managed() {
		return nil
	}
	n := Normalize(actual.GetGcRule())
	switch {
	case n.Intersection:
		return mismatch(IntersectionRule)
	case n.Unrecognized:
		return mismatch(UnrecognizedRule)
	case !n.HasAge && !n.HasVersions:
		return mismatch(NoRule)
	}
	want := Expected(p)
	if want == nil {
		// A rule strategy's GCPolicy builds that this package cannot
		// read: refused rather than taken for a match.
		return mismatch(UnrecognizedRule)
	}
	w := Normalize(want)
	switch {
	case !w.HasAge && n.HasAge:
		return mismatch(AgeRuleOnSequence)
	case w.HasAge && (!n.HasAge || n.Age != w.Age):
		return mismatch(WrongMaxAge)
	case w.HasVersions != n.HasVersions || w.Versions != n.Versions:
		return mismatch(WrongMaxVersions)
	}
	return nil
}

// Compare checks every family of schema against the table's families. It
// returns nil, or Mismatches sorted by family.
func Compare(table string, schema strategy.Schema, families map[string]*adminpb.ColumnFamily) error {
	names := make([]string, 0, len(schema))
	for fam := range schema {
		names = append(names, fam)
	}
	sort.Strings(names)
	var out Mismatches
	for _, fam := range names {
		if e := Check(table, fam, schema[fam], families[fam]); e != nil {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Admin reads a table's column families exactly, with the GC-rule protos
// the server returned. Build one with NewAdmin.
type Admin struct {
	client            *bigtable.AdminClient
	project, instance string
}

// NewAdmin reads through ac, an admin client of project and instance (the
// client does not reveal them, and the raw GetTable call needs the full
// table name).
func NewAdmin(ac *bigtable.AdminClient, project, instance string) *Admin {
	return &Admin{client: ac, project: project, instance: instance}
}

// Client is the admin client.
func (a *Admin) Client() *bigtable.AdminClient { return a.client }

// TableName is the table's full resource name.
func (a *Admin) TableName(table string) string {
	return fmt.Sprintf("projects/%s/instances/%s/tables/%s", a.project, a.instance, table)
}

// Families returns the table's column families as the server stores them.
func (a *Admin) Families(ctx context.Context, table string) (map[string]*adminpb.ColumnFamily, error) {
	t, err := a.client.TableAdminClientV2().GetTable(ctx, &adminpb.GetTableRequest{
		Name: a.TableName(table),
		View: adminpb.Table_SCHEMA_VIEW,
	})
	if err != nil {
		return nil, err
	}
	return t.GetColumnFamilies(), nil
}

// Verify reads the table's families and compares them with schema: nil, or
// Mismatches.
func (a *Admin) Verify(ctx context.Context, table string, schema strategy.Schema) error {
	fams, err := a.Families(ctx, table)
	if err != nil {
		return bttlerr.Wrap(err, "read GC rules of table %q", table)
	}
	return Compare(table, schema, fams)
}

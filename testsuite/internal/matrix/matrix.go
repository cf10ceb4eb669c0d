package matrix

import (
	"time"

	"github.com/bttl/bttl/strategy"
)

// The composition matrix (docs/design.md#composition) runs the same random
// history through every client path with every family option, on both
// servers, and checks every run against the model: the same reads and the
// same refusals, by class, whatever the path. Its axes are defined here;
// the paths are built in the package's tests (matrix_test.go), where the
// servers are.

// Paths of the matrix: how a program reaches the table.
const (
	// PathMutation is ttlclient.Table with ttlclient.Mutation.
	PathMutation = "Mutation"
	// PathTableAPI is ttlclient.Table.API() with *bigtable.Mutation.
	PathTableAPI = "TableAPI"
	// PathGuard is a plain *bigtable.Client on a connection carrying the
	// wire guard (no WithReadFilter): the program composes its read
	// filters with filters.Builder.Compose.
	PathGuard = "guard"
	// PathGuardReadFilter is a plain client under a guard with
	// wireguard.WithReadFilter: the guard filters its reads.
	PathGuardReadFilter = "guard+ReadFilter"
	// PathTTLGuard is ttlclient over a connection carrying the guard.
	PathTTLGuard = "ttlclient+guard"
	// PathTTLGuardReadFilter is ttlclient over a connection carrying the
	// guard with WithReadFilter.
	PathTTLGuardReadFilter = "ttlclient+guard+ReadFilter"
)

// Paths is every path, in the matrix's order.
var Paths = []string{PathMutation, PathTableAPI, PathGuard, PathGuardReadFilter, PathTTLGuard, PathTTLGuardReadFilter}

// FamilyOption is one option column of the matrix: options given to every
// family whose strategy takes them. The options' types say which: Age to
// both age families, OneSecond (WithDefaultTTL) to the one-second family
// only; a sequence or unmanaged family takes none, so it keeps its base
// policy in every column.
type FamilyOption struct {
	Name      string
	Age       []strategy.AgeOption       // options of both age strategies
	OneSecond []strategy.OneSecondOption // options of the one-second strategy alone
}

// Policy is base with the column's options, when base's strategy takes
// them all; ok is false, and the policy base, when it does not (the
// options would not compile there).
func (o FamilyOption) Policy(base strategy.Policy) (p strategy.Policy, ok bool) {
	if len(o.Age) == 0 && len(o.OneSecond) == 0 {
		return base, true
	}
	switch base.Kind() {
	case strategy.KindOneSecond:
		opts := append([]strategy.OneSecondOption(nil), o.OneSecond...)
		for _, a := range o.Age {
			opts = append(opts, a)
		}
		return strategy.OneSecond(opts...), base == strategy.OneSecond()
	case strategy.KindDefaultExpiry:
		if len(o.OneSecond) > 0 {
			return base, false
		}
		return strategy.DefaultExpiry(base.DefaultTTL(), o.Age...), base == strategy.DefaultExpiry(base.DefaultTTL())
	}
	return base, false
}

// OptionMixed is the suite's own schema (Schema), whose families combine
// options (one-second with a default TTL, max versions and write times;
// default expiry with write times and a time-to-idle; single value).
const OptionMixed = "mixed"

// The matrix's families: one per strategy, all four in every schema so a
// seed draws the same history whatever the option. A family whose strategy
// refuses an option keeps its base policy (the refusal is checked apart).
const (
	matrixD    = 1500 * time.Millisecond // default expiry's D
	matrixSeqN = 3
)

// MatrixFamilies is the families of a MatrixSchema, in draw order.
var MatrixFamilies = []string{FamOne, FamDef, FamSeq, FamPlain}

// MatrixBases is the base policy of each matrix family, before options.
func MatrixBases() map[string]strategy.Policy {
	return map[string]strategy.Policy{
		FamOne:   strategy.OneSecond(),
		FamDef:   strategy.DefaultExpiry(matrixD),
		FamSeq:   strategy.Sequence(matrixSeqN),
		FamPlain: strategy.Unmanaged(),
	}
}

// FamilyOptions is every option column. The durations suit the suite's
// clock moves and TTLs: a max TTL of 2s refuses (or clamps) many of the
// TTLs it draws, an idle TTL of 300ms is refreshed by most reads.
var FamilyOptions = []FamilyOption{
	{Name: "none"},
	{Name: "WriteTime", Age: []strategy.AgeOption{strategy.WithWriteTime()}},
	{Name: "SingleValue", Age: []strategy.AgeOption{strategy.SingleValue()}},
	{Name: "MaxVersions", Age: []strategy.AgeOption{strategy.WithMaxVersions(2)}},
	{Name: "IdleTTL", Age: []strategy.AgeOption{strategy.WithIdleTTL(300*time.Millisecond, 0.5)}},
	{Name: "MaxTTL", Age: []strategy.AgeOption{strategy.WithMaxTTL(2*time.Second, strategy.RefuseLonger)}},
	{Name: "MaxTTL+ClampTTL", Age: []strategy.AgeOption{strategy.WithMaxTTL(2*time.Second, strategy.ClampLonger)}},
	{Name: "DefaultTTL", OneSecond: []strategy.OneSecondOption{strategy.WithDefaultTTL(2 * time.Second)}},
	// A pair: a refresh moves the cell and its write-time companion.
	{Name: "WriteTime+IdleTTL", Age: []strategy.AgeOption{strategy.WithWriteTime(), strategy.WithIdleTTL(300*time.Millisecond, 0.5)}},
	{Name: OptionMixed},
}

// MatrixSchema is the schema of option column opt and its families in
// draw order. inapplicable names the families whose strategy does not take
// the option (its type does not fit, FamilyOption.Policy): they keep their
// base policy. Every policy it returns is valid.
func MatrixSchema(opt FamilyOption) (schema strategy.Schema, fams []string, inapplicable map[string]bool) {
	if opt.Name == OptionMixed {
		return Schema(), families, nil
	}
	schema = strategy.Schema{}
	for fam, base := range MatrixBases() {
		p, ok := opt.Policy(base)
		if !ok {
			if inapplicable == nil {
				inapplicable = map[string]bool{}
			}
			inapplicable[fam] = true
		}
		schema[fam] = p
	}
	return schema, MatrixFamilies, inapplicable
}

package matrix

import (
	"time"

	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/testsuite/internal/model"
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

// FamilyOption is one option column of the matrix. The columns are the
// model's (model.OptionColumns), so a new option touches the model, not
// the matrix.
type FamilyOption = model.FamilyOption

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

// FamilyOptions is every option column: none, the model's option columns,
// and the suite's own mixed schema.
var FamilyOptions = append(append([]FamilyOption{{Name: "none"}}, model.OptionColumns...), FamilyOption{Name: OptionMixed})

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

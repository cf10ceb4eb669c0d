package bttlerr_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/audit"
	bttestharness "github.com/bttl/bttl/bttest_harness"
	"github.com/bttl/bttl/changestream"
	"github.com/bttl/bttl/changestream/expiry"
	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/internal/bttlerr"
	migrate "github.com/bttl/bttl/internal/migratejob"
	scan "github.com/bttl/bttl/internal/scanjob"
	"github.com/bttl/bttl/provision"
	"github.com/bttl/bttl/schemafile"
	"github.com/bttl/bttl/strategy"
	"github.com/bttl/bttl/ttlclient"
	"github.com/bttl/bttl/wireguard"
)

// sentinels is every exported error variable of the library's packages,
// by package directory and name. TestEveryExportedErrorIsListed keeps it
// complete: a new sentinel must be added here, and so is checked.
var sentinels = map[string]error{
	"audit.ErrMetrics":                     audit.ErrMetrics,
	"audit.ErrMerge":                       audit.ErrMerge,
	"bttest_harness.ErrNoEmulator":         bttestharness.ErrNoEmulator,
	"bttest_harness.ErrNoCPUTime":          bttestharness.ErrNoCPUTime,
	"filters.ErrFilterTooLarge":            filters.ErrFilterTooLarge,
	"filters.ErrCellTooLargeToPin":         filters.ErrCellTooLargeToPin,
	"gcrule.ErrMismatch":                   gcrule.ErrMismatch,
	"migrate.ErrInvalidPlan":               migrate.ErrInvalidPlan,
	"migrate.ErrInvalidTTLRule":            migrate.ErrInvalidTTLRule,
	"migrate.ErrExpiredCount":              migrate.ErrExpiredCount,
	"migrate.ErrNoSuchCell":                migrate.ErrNoSuchCell,
	"migrate.ErrCellChanged":               migrate.ErrCellChanged,
	"migrate.ErrInvalidCell":               migrate.ErrInvalidCell,
	"migrate.ErrMerge":                     migrate.ErrMerge,
	"migrate.ErrMetrics":                   migrate.ErrMetrics,
	"migrate.ErrTTLChanged":                migrate.ErrTTLChanged,
	"changestream.ErrLeaseLost":            changestream.ErrLeaseLost,
	"changestream.ErrProtocol":             changestream.ErrProtocol,
	"changestream.ErrInvalidOption":        changestream.ErrInvalidOption,
	"changestream.ErrIdle":                 changestream.ErrIdle,
	"changestream.ErrNotInitialized":       changestream.ErrNotInitialized,
	"expiry.ErrInvalidOption":              expiry.ErrInvalidOption,
	"expiry.ErrBadEntry":                   expiry.ErrBadEntry,
	"provision.ErrPlanMismatch":            provision.ErrPlanMismatch,
	"provision.ErrUnsafeAdoption":          provision.ErrUnsafeAdoption,
	"provision.ErrRealTimestamps":          provision.ErrRealTimestamps,
	"provision.ErrAgeOverSequence":         provision.ErrAgeOverSequence,
	"provision.ErrNotSequenceNumbers":      provision.ErrNotSequenceNumbers,
	"provision.ErrHiddenColumns":           provision.ErrHiddenColumns,
	"provision.ErrInvalidOption":           provision.ErrInvalidOption,
	"provision.ErrChangeStreamLoss":        provision.ErrChangeStreamLoss,
	"scan.ErrOption":                       scan.ErrOption,
	"scan.ErrCheckpoint":                   scan.ErrCheckpoint,
	"scan.ErrCheckpointClaimed":            scan.ErrCheckpointClaimed,
	"scan.ErrStalled":                      scan.ErrStalled,
	"scan.ErrUnfinished":                   scan.ErrUnfinished,
	"schemafile.ErrInvalidFile":            schemafile.ErrInvalidFile,
	"strategy.ErrInvalidPolicy":            strategy.ErrInvalidPolicy,
	"strategy.ErrUnsupportedGCRule":        strategy.ErrUnsupportedGCRule,
	"strategy.ErrInvalidTTL":               strategy.ErrInvalidTTL,
	"strategy.ErrTTLTooLong":               strategy.ErrTTLTooLong,
	"strategy.ErrTimestampOverflow":        strategy.ErrTimestampOverflow,
	"strategy.ErrBeforeEpoch":              strategy.ErrBeforeEpoch,
	"strategy.ErrInvalidSequence":          strategy.ErrInvalidSequence,
	"strategy.ErrServerTimestamp":          strategy.ErrServerTimestamp,
	"strategy.ErrAlreadyExpired":           strategy.ErrAlreadyExpired,
	"strategy.ErrWrongCellOption":          strategy.ErrWrongCellOption,
	"strategy.ErrWriteTimeValue":           strategy.ErrWriteTimeValue,
	"ttlclient.ErrUnknownFamily":           ttlclient.ErrUnknownFamily,
	"ttlclient.ErrServerAssignedTimestamp": ttlclient.ErrServerAssignedTimestamp,
	"ttlclient.ErrNilMutation":             ttlclient.ErrNilMutation,
	"ttlclient.ErrEmptyMutation":           ttlclient.ErrEmptyMutation,
	"ttlclient.ErrNestedCondition":         ttlclient.ErrNestedCondition,
	"ttlclient.ErrConditionalInBulk":       ttlclient.ErrConditionalInBulk,
	"ttlclient.ErrEmptyRowKey":             ttlclient.ErrEmptyRowKey,
	"ttlclient.ErrRowKeyTooLong":           ttlclient.ErrRowKeyTooLong,
	"ttlclient.ErrValueTooLarge":           ttlclient.ErrValueTooLarge,
	"ttlclient.ErrTooManyMutations":        ttlclient.ErrTooManyMutations,
	"ttlclient.ErrTimestampGranularity":    ttlclient.ErrTimestampGranularity,
	"ttlclient.ErrInvalidTimestampRange":   ttlclient.ErrInvalidTimestampRange,
	"ttlclient.ErrNoAdminClient":           ttlclient.ErrNoAdminClient,
	"ttlclient.ErrTableNotFound":           ttlclient.ErrTableNotFound,
	"ttlclient.ErrNotDialed":               ttlclient.ErrNotDialed,
	"ttlclient.ErrNotApplicable":           ttlclient.ErrNotApplicable,
	"ttlclient.ErrReservedColumn":          ttlclient.ErrReservedColumn,
	"ttlclient.ErrNoWriteTime":             ttlclient.ErrNoWriteTime,
	"ttlclient.ErrCellMoved":               ttlclient.ErrCellMoved,
	"ttlclient.ErrCannotPersist":           ttlclient.ErrCannotPersist,
	"ttlclient.ErrReadOnlyView":            ttlclient.ErrReadOnlyView,
	"ttlclient.ErrUnfilteredSQL":           ttlclient.ErrUnfilteredSQL,
	"ttlclient.ErrSQLUnknownTable":         ttlclient.ErrSQLUnknownTable,
	"ttlclient.ErrTransactionsNotAllowed":  ttlclient.ErrTransactionsNotAllowed,
	"ttlclient.ErrReadOnlyProfile":         ttlclient.ErrReadOnlyProfile,
	"wireguard.ErrGuardInactive":           wireguard.ErrGuardInactive,
	"wireguard.ErrNotGuarded":              wireguard.ErrNotGuarded,
}

// structErrors is every exported error type, by package directory and
// name, filled in; those that print an error they wrap wrap a bttl
// sentinel, whose prefix must not show a second time.
var structErrors = map[string]error{
	"audit.MergeError":                            &audit.MergeError{Table: "t", Reason: "r"},
	"filters.SizeError":                           &filters.SizeError{Bytes: 30000, Limit: 20480},
	"filters.PinError":                            &filters.PinError{Family: "f", Column: "c", ValueBytes: 1 << 20},
	"gcrule.MismatchError":                        &gcrule.MismatchError{Table: "t", Family: "f"},
	"gcrule.Mismatches":                           gcrule.Mismatches{{Table: "t", Family: "f"}, {Table: "t", Family: "g"}},
	"migrate.PlanError":                           &migrate.PlanError{Field: "Family", Reason: "r"},
	"migrate.TTLRuleError":                        &migrate.TTLRuleError{Rule: "r", Reason: "r"},
	"migrate.ExpiredCountError":                   &migrate.ExpiredCountError{Expected: 1, Found: 2, AsOf: time.Unix(0, 0)},
	"migrate.CellError":                           &migrate.CellError{Cell: migrate.CellRef{Row: "r", Family: "f", Column: "c", Timestamp: 1000}, Reason: "r", Err: migrate.ErrNoSuchCell},
	"migrate.CellError (pin)":                     &migrate.CellError{Cell: migrate.CellRef{Row: "r", Family: "f", Column: "c", Timestamp: 1000}, Reason: "r", Err: filters.ErrCellTooLargeToPin},
	"migrate.MergeError":                          &migrate.MergeError{Reason: "r"},
	"migrate.TTLChangeError":                      &migrate.TTLChangeError{Record: "p", Updated: "2026-01-01T00:00:00Z", Earlier: []string{"1h"}, Now: []string{"2h"}, Moved: 3},
	"provision.AdoptionError":                     &provision.AdoptionError{Err: provision.ErrRealTimestamps, Table: "t", Family: "f"},
	"changestream.Error":                          &changestream.Error{Op: "read", Endpoint: "localhost:1", Table: "t", Err: changestream.ErrIdle},
	"provision.AdoptionError (hidden columns)":    &provision.AdoptionError{Err: provision.ErrHiddenColumns, Table: "t", Family: "f"},
	"provision.AdoptionError (age over sequence)": &provision.AdoptionError{Err: provision.ErrAgeOverSequence, Table: "t", Family: "f"},
	"provision.AdoptionError (not sequence)":      &provision.AdoptionError{Err: provision.ErrNotSequenceNumbers, Table: "t", Family: "f"},
	"provision.AdoptionError (stream loss)":       &provision.AdoptionError{Err: provision.ErrChangeStreamLoss, Table: "t", Stream: &provision.StreamChange{From: 24 * time.Hour}},
	"provision.AdoptionError (no finding)":        &provision.AdoptionError{Table: "t", Family: "f", Cells: 1},
	"scan.StallError":                             &scan.StallError{Interval: time.Second, Step: "ReadRows"},
	"scan.OptionError":                            &scan.OptionError{Option: "workers", Reason: "r"},
	"scan.CheckpointError":                        &scan.CheckpointError{Path: "p", Reason: "r", Err: scan.ErrCheckpointClaimed},
	"scan.RangeError":                             &scan.RangeError{Err: strategy.ErrInvalidTTL},
	"strategy.PolicyError":                        &strategy.PolicyError{Policy: strategy.DefaultExpiry(time.Hour), Param: strategy.ParamMaxTTL, Reason: "r"},
	"strategy.PolicyError (name)":                 &strategy.PolicyError{Family: "a b", Param: strategy.ParamFamilyName, Reason: "r"},
	"schemafile.Error":                            &schemafile.Error{File: "f.yaml", Line: 1, Column: 2, Err: strategy.ErrInvalidPolicy},
	"ttlclient.CellError":                         &ttlclient.CellError{Table: "t", Family: "f", Err: strategy.ErrInvalidTTL},
	"ttlclient.NoAdminError":                      &ttlclient.NoAdminError{Table: "t"},
	"ttlclient.SQLError":                          &ttlclient.SQLError{Query: "SELECT 1", Err: ttlclient.ErrUnfilteredSQL},
	"wireguard.VerifyError":                       &wireguard.VerifyError{Table: "t", Reason: "r", Err: status.Error(codes.FailedPrecondition, "bttl: wire guard refused MutateRow: rule verify-probe")},
	"scan.StallError (not ReadRows)":              &scan.StallError{Interval: time.Second, Step: "SampleRowKeys"},
	"ttlclient.ProfileError":                      &ttlclient.ProfileError{Profile: "multi", Call: "CheckAndMutateRow", Err: ttlclient.ErrTransactionsNotAllowed, Server: status.Error(codes.FailedPrecondition, "Single-row transactions are not allowed by this app profile")},
	"expiry.Error":                                &expiry.Error{Op: "read", Table: "t", Row: "r", Err: expiry.ErrBadEntry},
}

// onePrefix checks the convention on one message: it starts with the
// prefix, which shows nowhere else.
func onePrefix(t *testing.T, name, msg string) {
	t.Helper()
	assert.True(t, strings.HasPrefix(msg, bttlerr.Prefix), "%s: %q does not start with %q", name, msg, bttlerr.Prefix)
	assert.Equal(t, 1, strings.Count(msg, "bttl:"), "%s: %q shows the prefix more than once", name, msg)
}

func TestEveryExportedErrorCarriesOnePrefix(t *testing.T) {
	for name, err := range sentinels {
		require.NotNil(t, err, name)
		onePrefix(t, name, err.Error())
	}
	for name, err := range structErrors {
		onePrefix(t, name, err.Error())
	}
}

// libraryDirs are the library's packages: every directory with Go files
// but internal/, cmd/, examples/, scripts/, testsuite/ and zz_toolcheck/ (programs and
// test tools).
func libraryDirs(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	var dirs []string
	for _, e := range entries {
		switch n := e.Name(); {
		case !e.IsDir(), strings.HasPrefix(n, "."), n == "internal", n == "cmd", n == "examples", n == "scripts", n == "testsuite", n == "zz_toolcheck", n == "docs":
		default:
			if m, _ := filepath.Glob(filepath.Join(root, n, "*.go")); len(m) > 0 {
				dirs = append(dirs, n)
			}
		}
	}
	return dirs
}

// TestEveryExportedErrorIsListed walks the library's packages' sources and
// finds every exported error variable (Err...) and error type (...Error,
// Mismatches): each must be in sentinels or structErrors, so the test
// above checks every one.
func TestEveryExportedErrorIsListed(t *testing.T) {
	root := filepath.Join("..", "..")
	var found []string
	for _, dir := range libraryDirs(t, root) {
		paths, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		require.NoError(t, err)
		for _, path := range paths {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			require.NoError(t, err)
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok {
					continue
				}
				for _, s := range gd.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if gd.Tok == token.VAR && n.IsExported() && strings.HasPrefix(n.Name, "Err") {
								found = append(found, dir+"."+n.Name)
							}
						}
					case *ast.TypeSpec:
						if n := s.Name; n.IsExported() && (strings.HasSuffix(n.Name, "Error") || n.Name == "Mismatches") {
							found = append(found, dir+"."+n.Name)
						}
					}
				}
			}
		}
	}
	sort.Strings(found)
	require.NotEmpty(t, found)
	for _, name := range found {
		_, s := sentinels[name]
		_, e := structErrors[name]
		assert.True(t, s || e, "%s: an exported error not listed in sentinels or structErrors", name)
	}
	t.Logf("%d exported errors", len(found))
}

// TestWrappedThroughTwoPackagesShowsThePrefixOnce builds errors that cross
// packages: a policy error (strategy) wrapped by Schema.Validate and again
// by ttlclient's Open; a callback's bttl error wrapped by scan's
// RangeError; a filters error wrapped by the wire guard's New.
func TestWrappedThroughTwoPackagesShowsThePrefixOnce(t *testing.T) {
	bad := strategy.Schema{"f": strategy.Sequence(0)}
	h := bttestharness.New(t)
	ctx := context.Background()
	c := ttlclient.Wrap(h.Raw, ttlclient.WithoutVerify())
	_, err := c.Open(ctx, "t", bad)
	require.ErrorIs(t, err, strategy.ErrInvalidPolicy)
	onePrefix(t, "ttlclient.Open(strategy)", err.Error())
	assert.Contains(t, err.Error(), `open table "t"`)
	assert.Contains(t, err.Error(), `family "f"`)

	require.NoError(t, h.Admin.CreateTable(ctx, "t"))
	require.NoError(t, h.Admin.CreateColumnFamily(ctx, "t", "f"))
	mut := bigtable.NewMutation()
	mut.Set("f", "c", 1000, []byte("v"))
	require.NoError(t, h.Raw.Open("t").Apply(ctx, "r", mut))
	_, err = scan.Run(ctx, h.Raw.Open("t"), "t", func(context.Context, bigtable.Row) error {
		return fmt.Errorf("%w: from the callback", strategy.ErrInvalidTTL)
	})
	require.ErrorIs(t, err, strategy.ErrInvalidTTL)
	onePrefix(t, "scan.RangeError(strategy)", err.Error())

	_, err = wireguard.New(map[string]strategy.Schema{"t": bad})
	require.ErrorIs(t, err, strategy.ErrInvalidPolicy)
	onePrefix(t, "wireguard.New(strategy)", err.Error())

	err = bttlerr.Wrap(errors.Join(strategy.ErrInvalidTTL, strategy.ErrInvalidSequence), "context")
	onePrefix(t, "Wrap(errors.Join)", err.Error())
}

// provision's safety scan runs on the scan engine, whose errors carry the
// prefix: provision's context in front of one showed it twice. The data
// client's reads fail (PermissionDenied, which the client does not retry).
func TestProvisionScanErrorShowsThePrefixOnce(t *testing.T) {
	h := bttestharness.New(t)
	ctx := context.Background()
	require.NoError(t, h.Admin.CreateTable(ctx, "p"))
	require.NoError(t, h.Admin.CreateColumnFamily(ctx, "p", "f"))
	denied := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return status.Error(codes.PermissionDenied, "reads denied")
	})
	deniedStream := grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return nil, status.Error(codes.PermissionDenied, "reads denied")
	})
	dc, err := h.DialDataClient(ctx, denied, deniedStream)
	require.NoError(t, err)
	t.Cleanup(func() { _ = dc.Close() })
	p := provision.New(gcrule.NewAdmin(h.Admin, bttestharness.Project, bttestharness.Instance), dc.Client)
	_, err = p.PlanAndCheck(ctx, "p", strategy.Schema{"f": strategy.OneSecond()})
	require.Error(t, err)
	assert.Equal(t, codes.PermissionDenied, status.Code(err))
	onePrefix(t, "provision scan(scan)", err.Error())
	assert.Contains(t, err.Error(), `family "f"`)
}

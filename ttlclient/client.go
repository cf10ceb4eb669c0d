package ttlclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/internal/bttlerr"
	"github.com/bttl/bttl/internal/keytext"
	"github.com/bttl/bttl/internal/lifecycle"
	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/internal/shadow"
	"github.com/bttl/bttl/internal/sqlscan"
	"github.com/bttl/bttl/internal/wiremark"
	"github.com/bttl/bttl/internal/wirestream"
	"github.com/bttl/bttl/strategy"
)

// Schema maps a table's column families to their TTL policies; see package
// strategy. It is an alias of strategy.Schema, the one re-export ttlclient
// keeps: Open and Recorder take it, and ttlclient.Schema is the name every
// caller of Open writes (the same type: a strategy.Schema passes as is).
type Schema = strategy.Schema

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// The options are closed interfaces, one per place an option is given, in
// the style of cloud.google.com/go/bigtable's ReadOption and ApplyOption:
// an option implements the interface of every place it has a meaning, so
// one given where it has none does not compile.

// ClientOption configures a Client: given to Wrap or in
// ClientConfig.Options. An option that is also a TableOption (an Option)
// is the default of every table the client opens.
type ClientOption interface{ applyClient(*config) }

// TableOption configures one Table: given to Open, OpenAuthorizedView or
// OpenMaterializedView, it overrides the client's default for that table.
// The bounds of the client's shared pools, and WithSQLAllowed, are
// ClientOptions only (docs/design.md#client-options).
type TableOption interface{ applyTable(*config) }

// Option is an option valid in both places: on the client, as every
// table's default, and on one table.
type Option interface {
	ClientOption
	TableOption
}

// bothOption is an Option.
type bothOption func(*config)

func (o bothOption) applyClient(cfg *config) { o(cfg) }
func (o bothOption) applyTable(cfg *config)  { o(cfg) }

// clientOption is a ClientOption only.
type clientOption func(*config)

func (o clientOption) applyClient(cfg *config) { o(cfg) }

type config struct {
	clock         strategy.Clock
	logger        *slog.Logger
	admin         *gcrule.Admin
	skipVerify    bool
	verifyTimeout time.Duration
	recorder      Recorder
	sampling      float64
	shadowLimit   int
	rand          func() float64
	sqlAllowed    bool // PrepareStatement sends queries reading managed families
	idleWorkers   int
	idleQueue     int
	unlisted      *strategy.Policy // WithUnlistedFamilies; nil: strict
	txn           *bigtable.Client // WithTransactionalClient; nil: the client itself
	txnProfile    string
	instanceAdmin *bigtable.InstanceAdminClient // WithInstanceAdminClient; nil: profiles not checked
	instance      string
	keyText       keytext.Text // WithKeyRedaction; zero: quoted and cut
}

// DefaultVerifyTimeout bounds the admin call Open makes to verify GC rules.
const DefaultVerifyTimeout = 10 * time.Second

// WithLogger sets the logger (default: slog.Default()). Open logs there
// when it skips verification.
func WithLogger(l *slog.Logger) Option {
	return bothOption(func(cfg *config) {
		if l != nil {
			cfg.logger = l
		}
	})
}

// WithAdminClient gives the admin client Open uses to verify each table's GC
// rules, and the project and instance it was created for (needed to read the
// exact rule protos). NewClient and NewClientWithConfig create one
// themselves; Wrap needs this option or WithoutVerify.
func WithAdminClient(ac *bigtable.AdminClient, project, instance string) Option {
	return bothOption(func(cfg *config) {
		if ac != nil {
			cfg.admin = gcrule.NewAdmin(ac, project, instance)
		}
	})
}

// WithoutVerify makes Open skip the GC-rule check, for callers without
// admin permission. Open logs that it skipped: a family whose rule does not
// match its strategy loses data or serves cells the rule keeps.
func WithoutVerify() Option { return bothOption(func(cfg *config) { cfg.skipVerify = true }) }

// WithVerifyTimeout bounds the admin call Open makes (default
// DefaultVerifyTimeout).
func WithVerifyTimeout(d time.Duration) Option {
	return bothOption(func(cfg *config) {
		if d > 0 {
			cfg.verifyTimeout = d
		}
	})
}

// recordVerifySkipped is the one place a skipped verification is reported:
// logged, and counted by the table's recorder when there is one.
func (cfg *config) recordVerifySkipped(table string, rec TableRecorder) {
	if rec != nil {
		rec.VerifySkipped()
	}
	cfg.logger.Warn("bttl: GC rules not verified (WithoutVerify): a family whose rule does not match its strategy loses data or serves stale cells",
		slog.String("table", table))
}

// WithKeyRedaction makes the messages of this client's errors and log
// lines show no row key or column qualifier (nor SQL text): each is
// replaced by "[redacted N bytes hmac:T]", its length and a tag keyed by
// hashKey (nil: a random key per process; pass the same secret to every
// process, and to wireguard.WithKeyRedaction, to match tags across them).
// The errors' fields keep the full values, for errors.As
// (docs/design.md#keys-in-messages).
func WithKeyRedaction(hashKey []byte) Option {
	return prepareOption(func(cfg *config) { cfg.keyText = keytext.Redact(hashKey) })
}

// WithClock sets the clock (default: the system clock). Every timestamp
// the library writes and every read filter's bound comes from it.
func WithClock(c strategy.Clock) Option {
	return bothOption(func(cfg *config) {
		if c != nil {
			cfg.clock = c
		}
	})
}

// Client is a Bigtable data client whose tables apply per-cell TTLs.
type Client struct {
	raw     *bigtable.Client
	admin   *bigtable.AdminClient // created by NewClient; closed by Close
	owned   bool
	profile string              // raw's app profile, when known (NewClientWithConfig)
	txn     *bigtable.Client    // the transactional client NewClientWithConfig created; closed by Close
	opts    []ClientOption      // the client's options: its pools', and every table's defaults
	shadows *shadow.Pool        // shadow reads of tables with a Recorder
	sql     sqlscan.Catalog     // the managed families of what was opened, for PrepareStatement
	refresh *lifecycle.IdlePool // time-to-idle refreshes
	// wire: whether the client's connection carries bttl's interceptor
	// (wire.go), probed once by the first call that needs it.
	wire wirestream.Dialed
}

// ClientConfig is the configuration of NewClientWithConfig: the bigtable
// client's own, embedded so that every field of the client version in the
// build is reachable (code holding a bigtable.ClientConfig switches with
// ttlclient.ClientConfig{ClientConfig: cfg}), and bttl's options, which
// cannot travel among the option.ClientOptions.
type ClientConfig struct {
	bigtable.ClientConfig

	// Options configure the client (the bounds of its pools, the logger of
	// its start-up checks); those that are also TableOptions are the
	// defaults of every table it opens. See ClientOption.
	Options []ClientOption

	// TransactionalAppProfile is the app profile of the client's
	// single-row transactions (CheckAndMutateRow, ReadModifyWriteRow), when
	// it is not AppProfile: a profile with single-cluster routing and
	// allow_transactional_writes beside a multi-cluster AppProfile. The
	// client dials a second bigtable client for it, and Close closes both
	// (docs/design.md#app-profiles).
	TransactionalAppProfile string
}

// NewClient creates a client, exactly like bigtable.NewClient, and an admin
// client with the same project, instance and options, which Open uses to
// verify GC rules. Its bttl options are the defaults: give them with
// NewClientWithConfig. With a custom endpoint that serves only the data
// API, use Wrap and WithAdminClient instead.
func NewClient(ctx context.Context, project, instance string, opts ...option.ClientOption) (*Client, error) {
	return NewClientWithConfig(ctx, project, instance, ClientConfig{}, opts...)
}

// NewClientWithConfig creates a client, exactly like
// bigtable.NewClientWithConfig with config.ClientConfig, and an admin
// client as NewClient does. config.Options are the client's bttl options.
func NewClientWithConfig(ctx context.Context, project, instance string, config ClientConfig, opts ...option.ClientOption) (*Client, error) {
	// The session data plane carries requests inside streams bttl's
	// interceptor cannot rewrite: the client runs on the classic RPCs.
	btcfg := config.ClientConfig
	btcfg.DisableSession = true
	raw, err := bigtable.NewClientWithConfig(ctx, project, instance, btcfg, append(append([]option.ClientOption(nil), opts...), ClientOptions()...)...)
	if err != nil {
		return nil, err
	}
	admin, err := bigtable.NewAdminClient(ctx, project, instance, opts...)
	if err != nil {
		_ = raw.Close()
		return nil, bttlerr.Wrap(err, "admin client")
	}
	first := []ClientOption{WithAdminClient(admin, project, instance)}
	var txn *bigtable.Client
	if p := config.TransactionalAppProfile; p != "" && p != btcfg.AppProfile {
		txcfg := btcfg
		txcfg.AppProfile = p
		if txn, err = bigtable.NewClientWithConfig(ctx, project, instance, txcfg, append(append([]option.ClientOption(nil), opts...), ClientOptions()...)...); err != nil {
			_ = raw.Close()
			_ = admin.Close()
			return nil, bttlerr.Wrap(err, "transactional client (app profile %q)", p)
		}
		first = append(first, WithTransactionalClient(txn, p))
	}
	c := newClient(raw, append(first, config.Options...))
	c.admin, c.owned, c.profile, c.txn = admin, true, btcfg.AppProfile, txn
	return c, nil
}

// Wrap uses an existing client, with opts as the client's options (see
// ClientOption). Close leaves raw open: its owner closes it.
//
// What needs bttl's interceptor on raw's connection (Table.API, reads
// with options) works when raw was dialled with ClientOptions (or its
// connection with DialOptions), and is otherwise refused with
// ErrNotDialed before any request; the first such call probes the
// connection (docs/design.md#tableapi).
func Wrap(raw *bigtable.Client, opts ...ClientOption) *Client {
	return newClient(raw, opts)
}

// newClient is a client on raw whose options are opts: its pools get
// their bounds from them, once.
func newClient(raw *bigtable.Client, opts []ClientOption) *Client {
	c := &Client{raw: raw, opts: opts}
	cfg := c.config(nil)
	c.shadows = shadow.NewPool(cfg.shadowLimit, shadowTimeout)
	c.refresh = lifecycle.NewIdlePool(cfg.idleWorkers, cfg.idleQueue)
	return c
}

// Raw is the wrapped client, for calls the library does not cover. Writes
// through it bypass every guardrail.
func (c *Client) Raw() *bigtable.Client { return c.raw }

// Close stops the shadow reads in flight and waits for them, drops the
// time-to-idle refreshes queued (counted as IdleDropped), cancels those
// running and waits for them, then closes the underlying clients if
// NewClient created them. No goroutine of the client outlives it. To let
// the queued refreshes finish first, call FlushIdleRefreshes.
func (c *Client) Close() error {
	c.shadows.Close()
	c.refresh.Close()
	if !c.owned {
		return nil
	}
	// A connection of the caller's given to every client NewClient made is
	// closed more than once; a later close says only Canceled, which is
	// what Close wants.
	err := c.raw.Close()
	others := []io.Closer{c.admin}
	if c.txn != nil {
		others = []io.Closer{c.txn, c.admin}
	}
	for _, o := range others {
		if oerr := o.Close(); status.Code(oerr) != codes.Canceled || err != nil {
			err = errors.Join(err, oerr)
		}
	}
	return err
}

// FlushIdleRefreshes waits until the client has no time-to-idle refresh
// queued or running (see strategy.WithIdleTTL), or ctx is done: before
// Close, to let the refreshes of the last reads land, or in a test, to see
// their effect. Reads made meanwhile may queue more, which it waits for
// too.
func (c *Client) FlushIdleRefreshes(ctx context.Context) error { return c.refresh.Flush(ctx) }

// config is the client's configuration with a table's options over it.
func (c *Client) config(opts []TableOption) config {
	cfg := config{clock: systemClock{}, logger: slog.Default(), verifyTimeout: DefaultVerifyTimeout,
		sampling: DefaultShadowSampling, shadowLimit: DefaultShadowConcurrency, rand: rand.Float64,
		idleWorkers: DefaultIdleRefreshConcurrency, idleQueue: DefaultIdleRefreshQueue}
	for _, o := range c.opts {
		o.applyClient(&cfg)
	}
	for _, o := range opts {
		o.applyTable(&cfg)
	}
	return cfg
}

// Verify compares the table's actual column families and GC rules with the
// rules schema's strategies need. It returns nil, an error wrapping
// gcrule.ErrMismatch (a gcrule.Mismatches holding one *gcrule.MismatchError per
// family), ErrNoAdminClient, or the admin call's error.
func (c *Client) Verify(ctx context.Context, table string, schema Schema) error {
	_, err := c.verify(ctx, table, schema, c.config(nil))
	return err
}

// verify checks the table's GC rules against schema and returns the names
// of every family the table has, for the read filter.
func (c *Client) verify(ctx context.Context, table string, schema Schema, cfg config) ([]string, error) {
	if err := schema.Validate(); err != nil {
		return nil, bttlerr.Wrap(err, "verify table %q", table)
	}
	if cfg.admin == nil {
		return nil, &NoAdminError{Table: table}
	}
	fams, err := cfg.admin.Families(ctx, table)
	if status.Code(err) == codes.NotFound {
		return nil, fmt.Errorf("%w: %q (the admin API: %w)", ErrTableNotFound, table, err)
	}
	if err != nil {
		return nil, bttlerr.Wrap(err, "read GC rules of table %q", table)
	}
	if err := gcrule.Compare(table, schema, fams); err != nil {
		return nil, err
	}
	return slices.Collect(maps.Keys(fams)), nil
}

// Open returns a handle on table whose families follow schema. Families the
// schema does not name are read untouched, and writes to them are refused:
// name them with strategy.Unmanaged to write them, or let every one of them
// through as unmanaged with WithUnlistedFamilies.
//
// Open first verifies, with the admin client and within the verify
// timeout, that the table has every family of the schema with the GC rule
// its strategy needs (see Verify): without an admin client it fails with
// ErrNoAdminClient, and WithoutVerify skips the check and logs that it
// did. The verification also reads the names of the table's families,
// and the read filter selects them by name, with no regex: a family
// created after Open is not read until the table is opened again
// (docs/design.md#verification). A read filter larger than Bigtable serves
// fails Open with filters.ErrFilterTooLarge (a *filters.SizeError).
//
// ctx bounds the admin call, Open's only I/O. opts override the client's
// options for this table (see TableOption).
func (c *Client) Open(ctx context.Context, table string, schema Schema, opts ...TableOption) (*Table, error) {
	return c.open(ctx, table, func(bc *bigtable.Client) bigtable.TableAPI { return bc.Open(table) }, schema, opts, true)
}

// open returns a Table named table, sending its requests through what
// opener opens on the client (the table, or one of its views), and its
// single-row transactions through what it opens on the transactional
// client, whose families follow schema. verify says
// whether table names a table, whose GC rules can be checked: a
// materialized view has none.
func (c *Client) open(ctx context.Context, table string, opener func(*bigtable.Client) bigtable.TableAPI, schema Schema, opts []TableOption, verify bool) (*Table, error) {
	cfg := c.config(opts)
	raw, txn, txnProfile := opener(c.raw), bigtable.TableAPI(nil), c.profile
	if txn = raw; cfg.txn != nil {
		txn, txnProfile = opener(cfg.txn), cfg.txnProfile
	}
	var rec TableRecorder
	if cfg.recorder != nil {
		rec = cfg.recorder.Table(table, schema)
	}
	refuse := func(err error) (*Table, error) {
		recordOpenRefusal(rec, err)
		return nil, &codedError{bttlerr.Wrap(err, "open table %q", table)}
	}
	if err := errors.Join(schema.Validate(), checkUnlisted(cfg.unlisted)); err != nil {
		return refuse(err)
	}
	var filterOpts []filters.Option
	switch {
	case !verify:
		// No GC rules to check: every family outside schema is read untouched.
	case cfg.skipVerify:
		cfg.recordVerifySkipped(table, rec)
	default:
		ctx, cancel := context.WithTimeout(ctx, cfg.verifyTimeout)
		families, err := c.verify(ctx, table, schema, cfg)
		cancel()
		if err != nil {
			return refuse(err)
		}
		if cfg.unlisted == nil {
			// Unlisted families, when written, are read whenever created:
			// see WithUnlistedFamilies.
			filterOpts = append(filterOpts, filters.WithFamilies(families))
		}
	}
	fb, err := filters.New(schema, filterOpts...)
	if err == nil {
		err = fb.CheckSize()
	}
	if err != nil {
		return refuse(err)
	}
	own := make(Schema, len(schema))
	hasAge, singleValue := false, false
	var managed []string
	for fam, p := range schema {
		own[fam] = p
		if p.Managed() {
			managed = append(managed, fam)
		}
		hasAge = hasAge || p.MaxAge() > 0
		singleValue = singleValue || p.ReplacesColumn()
	}
	t := &Table{
		name:        table,
		raw:         raw,
		schema:      own,
		filters:     fb,
		clock:       cfg.clock,
		hasAge:      hasAge,
		singleValue: singleValue,
		logger:      cfg.logger,
		keyText:     cfg.keyText,
		unlisted:    cfg.unlisted,
		wireState:   &c.wire,
		rec:         rec,
		profile:     c.profile,
		txn:         txn,
		txnProfile:  txnProfile,
	}
	t.rules, err = rules.NewTable(table, own, cfg.unlisted, rules.ModeClient, fb)
	if err != nil {
		return nil, &codedError{bttlerr.Wrap(err, "open table %q", table)}
	}
	t.mark = &wiremark.Mark{Table: table, View: !verify, Schema: own, Unlisted: cfg.unlisted}
	t.life = t.newLifecycle()
	t.idle = t.newIdle(c.refresh)
	if verify && !cfg.skipVerify {
		if err := c.checkProfiles(ctx, t, &cfg); err != nil {
			recordOpenRefusal(rec, err)
			return nil, bttlerr.Wrap(err, "open table %q", table)
		}
	}
	t.idleRec, _ = rec.(IdleRecorder)
	t.obs = newObserver(&cfg, rec, t, c.shadows)
	c.sql.Remember(table, managed)
	return t, nil
}

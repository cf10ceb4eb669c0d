package ttlclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/gcrule"
	"github.com/bttl/bttl/internal/bttlerr"
	"github.com/bttl/bttl/internal/keytext"
	"github.com/bttl/bttl/internal/wiremark"
	"github.com/bttl/bttl/strategy"
)

// Schema maps a table's column families to their TTL policies; see package
// strategy. It is an alias of strategy.Schema, the one re-export ttlclient
// keeps: Open and Recorder take it, and ttlclient.Schema is the name every
// caller of Open writes (the same type: a strategy.Schema passes as is).
type Schema = strategy.Schema

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Option configures a Client or a Table. Options given to the client
// (Wrap, ClientConfig.Options) configure it and are the defaults of every
// table it opens; options given to Open override those defaults for one
// table. The bounds of the client's pools (WithShadowConcurrency,
// WithIdleRefreshConcurrency, WithIdleRefreshQueue) are the client's only:
// Open refuses them (ErrClientOption), since a table's bound on a pool its
// tables share would let it take every slot.
type Option func(*config)

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
	keyText       keytext.Text     // WithKeyRedaction; zero: quoted and cut
}

// clientOnly refuses, among a table's options, those that bound the
// client's pools: a pool its tables share has one bound, the client's.
func clientOnly(opts []Option) error {
	var given config // zero: an option that sets a bound makes it non-zero
	for _, o := range opts {
		o(&given)
	}
	var names []string
	if given.shadowLimit != 0 {
		names = append(names, "WithShadowConcurrency")
	}
	if given.idleWorkers != 0 {
		names = append(names, "WithIdleRefreshConcurrency")
	}
	if given.idleQueue != 0 {
		names = append(names, "WithIdleRefreshQueue")
	}
	if names == nil {
		return nil
	}
	return fmt.Errorf("%w: %s bound(s) the client's pools, shared by its tables: give them to Wrap or ClientConfig.Options",
		ErrClientOption, strings.Join(names, ", "))
}

// DefaultVerifyTimeout bounds the admin call Open makes to verify GC rules.
const DefaultVerifyTimeout = 10 * time.Second

// WithLogger sets the logger (default: slog.Default()). Open logs there
// when it skips verification.
func WithLogger(l *slog.Logger) Option {
	return func(cfg *config) {
		if l != nil {
			cfg.logger = l
		}
	}
}

// WithAdminClient gives the admin client Open uses to verify each table's GC
// rules, and the project and instance it was created for (needed to read the
// exact rule protos). NewClient and NewClientWithConfig create one
// themselves; Wrap needs this option or WithoutVerify.
func WithAdminClient(ac *bigtable.AdminClient, project, instance string) Option {
	return func(cfg *config) {
		if ac != nil {
			cfg.admin = gcrule.NewAdmin(ac, project, instance)
		}
	}
}

// WithoutVerify makes Open skip the GC-rule check, for callers without
// admin permission. Open logs that it skipped: a family whose rule does not
// match its strategy loses data or serves cells the rule keeps.
func WithoutVerify() Option { return func(cfg *config) { cfg.skipVerify = true } }

// WithVerifyTimeout bounds the admin call Open makes (default
// DefaultVerifyTimeout).
func WithVerifyTimeout(d time.Duration) Option {
	return func(cfg *config) {
		if d > 0 {
			cfg.verifyTimeout = d
		}
	}
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
// replaced by "[redacted N bytes hmac:T]", N its length and T the first 6
// bytes, in hex, of HMAC-SHA256 of it under hashKey, so messages about the
// same key can be matched without showing it. A nil hashKey is a random key
// drawn once per process (tags match within the process only); pass the
// same secret to every process, and to wireguard.WithKeyRedaction, to match
// tags across them. Without it a key is quoted (strconv.Quote) and cut to
// 64 bytes. Either way the errors' fields (CellError.Row, .Column,
// SQLError.Query) keep the full values, for errors.As: redaction is about
// the text that reaches logs (docs/design.md#keys-in-messages).
func WithKeyRedaction(hashKey []byte) Option {
	return func(cfg *config) { cfg.keyText = keytext.Redact(hashKey) }
}

// WithClock sets the clock (default: the system clock). Every timestamp
// the library writes and every read filter's bound comes from it.
func WithClock(c strategy.Clock) Option {
	return func(cfg *config) {
		if c != nil {
			cfg.clock = c
		}
	}
}

// Client is a Bigtable data client whose tables apply per-cell TTLs.
type Client struct {
	raw     *bigtable.Client
	admin   *bigtable.AdminClient // created by NewClient; closed by Close
	owned   bool
	opts    []Option    // the client's options: its pools', and every table's defaults
	shadows shadowPool  // shadow reads of tables with a Recorder
	sql     sqlSchemas  // the schemas of what was opened, for PrepareStatement
	refresh refreshPool // time-to-idle refreshes
	// incompatible are the client-version checks that failed when the
	// client was made (CheckCompatibility), counted at each Open.
	incompatible []CompatibilityFailure
	// layout is bigtable.Mutation's layout, checked when the client was
	// made (nil, and layoutErr, when the check failed): its tables' writes
	// read it, never the check.
	layout    *rawLayout
	layoutErr error
}

// ClientConfig is the configuration of NewClientWithConfig: the bigtable
// client's own, passed to bigtable.NewClientWithConfig as it is, and bttl's
// options for the client.
//
// bttl's options cannot travel among the option.ClientOptions (their one
// method takes a type internal to google.golang.org/api), so they come in
// the config, in the call's same shape as bigtable.NewClientWithConfig's.
// The bigtable config is embedded rather than copied field by field so
// that every field of the client version in the build, present or future,
// is reachable (cfg.AppProfile = ...) and none lags a client upgrade: code
// holding a bigtable.ClientConfig switches with
// ttlclient.ClientConfig{ClientConfig: cfg}.
type ClientConfig struct {
	bigtable.ClientConfig

	// Options configure the client (the bounds of its pools, the logger of
	// its start-up checks) and are the defaults of every table it opens;
	// see Option.
	Options []Option
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
	raw, err := bigtable.NewClientWithConfig(ctx, project, instance, config.ClientConfig, opts...)
	if err != nil {
		return nil, err
	}
	admin, err := bigtable.NewAdminClient(ctx, project, instance, opts...)
	if err != nil {
		_ = raw.Close()
		return nil, bttlerr.Wrap(err, "admin client")
	}
	c := newClient(raw, append([]Option{WithAdminClient(admin, project, instance)}, config.Options...))
	c.admin, c.owned = admin, true
	return c, nil
}

// Wrap uses an existing client, with opts as the client's options (see
// Option). Close leaves raw open: its owner closes it.
//
// NewClient, NewClientWithConfig and Wrap run CheckCompatibility and log
// a failure once, as a warning on the client's logger; each Open then
// counts it on the table's recorder (CompatibilityRecorder). The client is
// made either way: what then fails is in CompatibilityFailure.Effect.
func Wrap(raw *bigtable.Client, opts ...Option) *Client {
	return newClient(raw, opts)
}

// newClient is a client on raw whose options are opts: its pools get
// their bounds from them, once.
func newClient(raw *bigtable.Client, opts []Option) *Client {
	c := &Client{raw: raw, opts: opts}
	cfg := c.config(nil)
	c.shadows.limit = cfg.shadowLimit
	c.refresh.workers, c.refresh.queueLimit = cfg.idleWorkers, cfg.idleQueue
	c.layout, c.layoutErr = layout()
	c.checkCompatibility()
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
	c.shadows.close()
	c.refresh.close()
	if !c.owned {
		return nil
	}
	// NewClient gives both clients the caller's options: one connection
	// of the caller's (option.WithGRPCConn, as wireguard's ClientOptions
	// are under an emulator) is then closed twice, and the second close
	// says only that it is closed already (Canceled, all a connection's
	// Close returns besides nil), which is what Close wants.
	err := c.raw.Close()
	if aerr := c.admin.Close(); status.Code(aerr) != codes.Canceled || err != nil {
		err = errors.Join(err, aerr)
	}
	return err
}

// FlushIdleRefreshes waits until the client has no time-to-idle refresh
// queued or running (see strategy.WithIdleTTL), or ctx is done: before
// Close, to let the refreshes of the last reads land, or in a test, to see
// their effect. Reads made meanwhile may queue more, which it waits for
// too.
func (c *Client) FlushIdleRefreshes(ctx context.Context) error { return c.refresh.flush(ctx) }

func (c *Client) config(opts []Option) config {
	cfg := config{clock: systemClock{}, logger: slog.Default(), verifyTimeout: DefaultVerifyTimeout,
		sampling: DefaultShadowSampling, shadowLimit: DefaultShadowConcurrency, rand: rand.Float64,
		idleWorkers: DefaultIdleRefreshConcurrency, idleQueue: DefaultIdleRefreshQueue}
	for _, o := range c.opts {
		o(&cfg)
	}
	for _, o := range opts {
		o(&cfg)
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
	names := make([]string, 0, len(fams))
	for name := range fams {
		names = append(names, name)
	}
	return names, nil
}

// Open returns a handle on table whose families follow schema. Families the
// schema does not name are read untouched, and writes to them are refused:
// name them with strategy.Unmanaged to write them, or let every one of them
// through as unmanaged with WithUnlistedFamilies.
//
// Open first verifies, with the admin client, that the table has every
// family of the schema with the GC rule its strategy needs (see Verify),
// within the verify timeout. Without an admin client it fails with
// ErrNoAdminClient; WithoutVerify skips the check and logs that it did.
//
// The verification also reads the names of the table's families, and the
// read filter is built for them: families are selected by name, with no
// regex, and families sharing a rule share one branch. A family created
// after Open (necessarily one the schema does not name: the schema's
// families were checked) is not among them, so until the table is opened
// again reads return none of its cells; except when one rule covers every
// family the table had (a single managed family, say), where the filter is
// that rule alone and the new family's cells are filtered by it. No read
// returns an expired cell of a schema family either way. With WithoutVerify
// the families are not read: every family outside the schema, whenever
// created, is read untouched, through a complement regex that the emulators
// evaluate slowly.
//
// Open fails with filters.ErrFilterTooLarge (a *filters.SizeError) when the read
// filter is larger than the largest filter Bigtable serves
// (filters.MaxFilterBytes, 20 KiB): without the family names that can
// happen from about 60 managed families of 20-byte names.
//
// Open is OpenContext with context.Background(): its admin call (up to the
// verify timeout, 10 s by default) cannot be cancelled by the caller.
//
// Deprecated: Use OpenContext, which takes the caller's context.
func (c *Client) Open(table string, schema Schema, opts ...Option) (*Table, error) {
	return c.OpenContext(context.Background(), table, schema, opts...)
}

// OpenContext is Open with the caller's context for the admin call that
// verifies GC rules, which is still bounded by the verify timeout.
//
// opts override the client's options for this table. The bounds of the
// client's pools are the client's only: given here, they are refused with
// ErrClientOption before any admin call (see Option).
func (c *Client) OpenContext(ctx context.Context, table string, schema Schema, opts ...Option) (*Table, error) {
	return c.open(ctx, table, c.raw.Open(table), schema, opts, true)
}

// open returns a Table named table, sending its requests through raw (the
// table, or one of its views), whose families follow schema. verify says
// whether table names a table, whose GC rules can be checked: a
// materialized view has none.
func (c *Client) open(ctx context.Context, table string, raw bigtable.TableAPI, schema Schema, opts []Option, verify bool) (*Table, error) {
	cfg := c.config(opts)
	var rec TableRecorder
	if cfg.recorder != nil {
		rec = cfg.recorder.Table(table, schema)
		c.recordIncompatible(rec)
	}
	if err := errors.Join(clientOnly(opts), schema.Validate(), checkUnlisted(cfg.unlisted)); err != nil {
		recordOpenRefusal(rec, err)
		return nil, &codedError{bttlerr.Wrap(err, "open table %q", table)}
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
			recordOpenRefusal(rec, err)
			return nil, &codedError{bttlerr.Wrap(err, "open table %q", table)}
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
		recordOpenRefusal(rec, err)
		return nil, &codedError{bttlerr.Wrap(err, "open table %q", table)}
	}
	own := make(Schema, len(schema))
	hasAge, singleValue := false, false
	for fam, p := range schema {
		own[fam] = p
		hasAge = hasAge || p.MaxAge() > 0
		singleValue = singleValue || p.IsSingleValue()
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
		idleFams:    idleFamilies(own),
		refresh:     &c.refresh,
		unlisted:    cfg.unlisted,
		layout:      c.layout,
		layoutErr:   c.layoutErr,
	}
	t.mark = &wiremark.Mark{Table: table, View: !verify, Schema: own, Unlisted: cfg.unlisted}
	t.idleRec, _ = rec.(IdleRecorder)
	t.obs = newObserver(&cfg, rec, t, &c.shadows)
	c.sql.remember(table, own)
	return t, nil
}

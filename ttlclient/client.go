package ttlclient

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
)

// Schema maps a table's column families to their TTL policies; see package
// strategy.
type Schema = strategy.Schema

// Clock tells the time. Every timestamp the library writes and every read
// filter's bound comes from it, so tests move time instead of sleeping.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Option configures a Client or a Table. Options given to Wrap apply to
// every table the client opens; options given to Open override them.
type Option func(*config)

type config struct {
	clock       Clock
	recorder    Recorder
	sampling    float64
	shadowLimit int
	rand        func() float64
}

// WithClock sets the clock (default: the system clock).
func WithClock(c Clock) Option {
	return func(cfg *config) {
		if c != nil {
			cfg.clock = c
		}
	}
}

// Client is a Bigtable data client whose tables apply per-cell TTLs.
type Client struct {
	raw     *bigtable.Client
	owned   bool
	opts    []Option
	shadows shadowPool // shadow reads of tables with a Recorder
}

// NewClient creates a client, exactly like bigtable.NewClient.
func NewClient(ctx context.Context, project, instance string, opts ...option.ClientOption) (*Client, error) {
	raw, err := bigtable.NewClient(ctx, project, instance, opts...)
	if err != nil {
		return nil, err
	}
	return &Client{raw: raw, owned: true}, nil
}

// NewClientWithConfig creates a client, exactly like
// bigtable.NewClientWithConfig.
func NewClientWithConfig(ctx context.Context, project, instance string, cfg bigtable.ClientConfig, opts ...option.ClientOption) (*Client, error) {
	raw, err := bigtable.NewClientWithConfig(ctx, project, instance, cfg, opts...)
	if err != nil {
		return nil, err
	}
	return &Client{raw: raw, owned: true}, nil
}

// Wrap uses an existing client. Close leaves it open: its owner closes it.
func Wrap(raw *bigtable.Client, opts ...Option) *Client {
	return &Client{raw: raw, opts: opts}
}

// Raw is the wrapped client, for calls the library does not cover. Writes
// through it bypass every guardrail.
func (c *Client) Raw() *bigtable.Client { return c.raw }

// Close stops the shadow reads in flight and waits for them, then closes
// the underlying client if NewClient created it.
func (c *Client) Close() error {
	c.shadows.close()
	if c.owned {
		return c.raw.Close()
	}
	return nil
}

// Open returns a handle on table whose families follow schema. Families the
// schema does not name are read untouched, and writes to them are refused:
// name them with strategy.Unmanaged to write them.
func (c *Client) Open(table string, schema Schema, opts ...Option) (*Table, error) {
	cfg := config{clock: systemClock{}, sampling: DefaultShadowSampling, shadowLimit: DefaultShadowConcurrency, rand: rand.Float64}
	for _, o := range c.opts {
		o(&cfg)
	}
	for _, o := range opts {
		o(&cfg)
	}
	fb, err := filters.New(schema)
	if err != nil {
		if cfg.recorder != nil {
			cfg.recorder.Table(table, schema).Refused("", RefusalReason(err))
		}
		return nil, fmt.Errorf("open table %q: %w", table, err)
	}
	own := make(Schema, len(schema))
	for fam, p := range schema {
		own[fam] = p
	}
	t := &Table{
		name:    table,
		raw:     c.raw.Open(table),
		schema:  own,
		filters: fb,
		clock:   cfg.clock,
	}
	t.obs = newObserver(&cfg, t, &c.shadows)
	return t, nil
}

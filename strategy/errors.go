package strategy

import "errors"

// Sentinel errors of the strategy math. Every error this package returns
// wraps exactly one of them, for errors.Is.
var (
	// ErrInvalidPolicy: a policy or schema that cannot work (bad family
	// name, non-positive default TTL, zero versions, ...).
	ErrInvalidPolicy = errors.New("bttl: invalid policy")
	// ErrUnsupportedGCRule: a GC rule no read filter can reproduce, such as
	// an intersection.
	ErrUnsupportedGCRule = errors.New("bttl: unsupported GC rule")
	// ErrInvalidTTL: a TTL below 1ms (zero, negative, or a conversion that
	// produced a nonsense duration).
	ErrInvalidTTL = errors.New("bttl: invalid TTL")
	// ErrTTLTooLong: a TTL over the family's cap (WithMaxTTL), or an
	// explicit timestamp implying one.
	ErrTTLTooLong = errors.New("bttl: TTL over the family's max TTL")
	// ErrTimestampOverflow: the timestamp for this TTL does not fit in int64.
	ErrTimestampOverflow = errors.New("bttl: timestamp overflows")
	// ErrBeforeEpoch: the timestamp would land before the Unix epoch.
	ErrBeforeEpoch = errors.New("bttl: timestamp before the epoch")
	// ErrInvalidSequence: a sequence number below 1, whose timestamp
	// overflows, or an explicit timestamp that is not seq*1000.
	ErrInvalidSequence = errors.New("bttl: invalid sequence number")
	// ErrServerTimestamp: a server-assigned timestamp (bigtable.ServerTime)
	// where the library cannot assign one itself; on a one-second family the
	// cell would expire at once.
	ErrServerTimestamp = errors.New("bttl: server timestamp on a managed family")
	// ErrAlreadyExpired: an explicit timestamp whose cell is expired the
	// moment it is written (on a one-second family: a "real" timestamp <= now).
	ErrAlreadyExpired = errors.New("bttl: cell would be expired on arrival")
	// ErrWrongCellOption: a TTL on a sequence or unmanaged family, a
	// sequence number on an age family, or more than one cell option on one
	// cell (ttlclient's Mutation.Set).
	ErrWrongCellOption = errors.New("bttl: cell option does not fit the family's strategy")
)

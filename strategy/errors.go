package strategy

import (
	"errors"
	"strconv"
)

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

// Param names the parameter of a policy that PolicyError is about: a
// constructor's positional argument or an option's.
type Param string

// The parameters a PolicyError can name.
const (
	ParamFamilyName   Param = "family name"   // a Schema's key
	ParamKind         Param = "kind"          // a Policy built by none of the constructors
	ParamDefaultTTL   Param = "default TTL"   // DefaultExpiry's d, WithDefaultTTL's d
	ParamVersions     Param = "versions"      // Sequence's n
	ParamMaxVersions  Param = "max versions"  // WithMaxVersions's n
	ParamIdleTTL      Param = "idle TTL"      // WithIdleTTL's d
	ParamIdleDebounce Param = "idle debounce" // WithIdleTTL's debounce
	ParamMaxTTL       Param = "max TTL"       // WithMaxTTL's d
	ParamOverMaxTTL   Param = "over max TTL"  // WithMaxTTL's over
)

// PolicyError is a policy or schema that cannot work: the parameter at
// fault and why. It wraps ErrInvalidPolicy. The options' types already
// keep out what does not fit a strategy (an age option on a sequence
// family, a default TTL beside DefaultExpiry's); what is left is values
// out of range and values that contradict each other (a default TTL over
// the max TTL), which Validate reports with it.
type PolicyError struct {
	Family string // the family, when a Schema was validated; empty otherwise
	Policy Policy // the policy refused (zero for a bad family name)
	Param  Param  // the parameter at fault
	Reason string // what is wrong with it
}

func (e *PolicyError) Error() string {
	// Family is not printed: Schema.Validate puts it in front, as the
	// context of a wrapped error.
	if e.Param == ParamFamilyName {
		return ErrInvalidPolicy.Error() + ": family name " + strconv.Quote(e.Family) + ": " + e.Reason
	}
	return ErrInvalidPolicy.Error() + ": " + e.Policy.String() + ": " + e.Reason
}

// Unwrap makes errors.Is match ErrInvalidPolicy.
func (e *PolicyError) Unwrap() error { return ErrInvalidPolicy }

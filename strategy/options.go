package strategy

import (
	"fmt"
	"time"
)

// The options are closed interfaces, one per kind of family that takes
// them, in the style of cloud.google.com/go/bigtable's ReadOption and
// ApplyOption: an option implements the interface of every strategy it is
// valid on, so one a strategy cannot take does not compile there.
// Sequence and Unmanaged take no options: a sequence family's timestamps
// are versions, not times, so no TTL option means anything on it, and its
// only parameter, n, is positional.

// OneSecondOption configures a one-second family (OneSecond): every
// AgeOption, and WithDefaultTTL, which only a one-second family takes (a
// default-expiry family's default TTL is DefaultExpiry's d).
type OneSecondOption interface{ applyOneSecond(*Policy) }

// AgeOption configures an age family, one-second or default expiry
// (OneSecond, DefaultExpiry): every AgeOption is also a OneSecondOption.
type AgeOption interface {
	OneSecondOption
	applyAge(*Policy)
}

// ageOption is an option every age family takes.
type ageOption func(*Policy)

func (o ageOption) applyAge(p *Policy)       { o(p) }
func (o ageOption) applyOneSecond(p *Policy) { o(p) }

// oneSecondOption is an option only a one-second family takes.
type oneSecondOption func(*Policy)

func (o oneSecondOption) applyOneSecond(p *Policy) { o(p) }

// WithMaxVersions adds a max-versions rule in union with the age rule of an
// age strategy: the family keeps at most n live cells per column (n >= 1).
func WithMaxVersions(n int) AgeOption {
	return ageOption(func(p *Policy) { p.versions, p.given = n, p.given|givenMaxVersions })
}

// WithDefaultTTL gives a one-second family the TTL used for cells written
// without one. A default-expiry family's default TTL is DefaultExpiry's d:
// it does not take this option.
func WithDefaultTTL(d time.Duration) OneSecondOption {
	return oneSecondOption(func(p *Policy) { p.defaultTTL = d })
}

// SingleValue makes a write replace the column's older cells in the same
// atomic row mutation, so the last write wins whatever the TTLs.
func SingleValue() AgeOption { return ageOption(func(p *Policy) { p.singleValue = true }) }

// DefaultIdleDebounce is the debounce WithIdleTTL is usually given: a
// tenth of the idle TTL.
const DefaultIdleDebounce = 0.1

// WithIdleTTL gives an age family a time-to-idle: a cell a read through
// bttl returns whose remaining TTL is below (1-debounce)*d is refreshed,
// off the caller's path, to expire d after the refresh. A cell read at
// least that often never expires; one left unread expires as written. A
// cell with more time left (written with a longer TTL) is left alone:
// time-to-idle never shortens a TTL. d is at least 1ms.
//
// debounce is a fraction of d in [0, 1) (DefaultIdleDebounce, a tenth, is
// the usual choice): a cell read continually is rewritten at most once per
// debounce*d. A fraction, not a duration, so that it scales with d: a fixed
// debounce as long as d would never refresh anything. 0 refreshes on every
// read a millisecond after the last refresh. The idle TTL and its debounce
// are one option because neither means anything without the other.
func WithIdleTTL(d time.Duration, debounce float64) AgeOption {
	return ageOption(func(p *Policy) { p.idleTTL, p.debounce, p.given = d, debounce, p.given|givenIdleTTL })
}

// OverMaxTTL says what a family with a max TTL (WithMaxTTL) does with a
// longer TTL.
type OverMaxTTL uint8

const (
	// RefuseLonger refuses a write (or an extend) whose TTL is over the
	// cap, or whose explicit timestamp implies one, with ErrTTLTooLong
	// before any RPC.
	RefuseLonger OverMaxTTL = iota
	// ClampLonger lowers a longer TTL to the cap. It is a choice of its
	// own, never the default, because a clamped TTL silently shortens what
	// the caller asked for.
	ClampLonger
)

func (o OverMaxTTL) String() string {
	switch o {
	case RefuseLonger:
		return "refuse"
	case ClampLonger:
		return "clamp"
	}
	return fmt.Sprintf("OverMaxTTL(%d)", uint8(o))
}

// WithMaxTTL caps the TTL of the family's cells at d (at least 1ms): a
// write (or an extend) whose TTL is longer, or whose explicit timestamp
// implies a longer one, is refused with ErrTTLTooLong (RefuseLonger) or
// lowered to d (ClampLonger), as over says.
func WithMaxTTL(d time.Duration, over OverMaxTTL) AgeOption {
	return ageOption(func(p *Policy) {
		p.maxTTL, p.over, p.clampTTL, p.given = d, over, over == ClampLonger, p.given|givenMaxTTL
	})
}

// WithWriteTime makes every cell written to the family also record its real
// write time, in a companion cell of the same family with the same
// timestamp, so that GC removes both together (see
// docs/design.md#write-time).
func WithWriteTime() AgeOption { return ageOption(func(p *Policy) { p.writeTime = true }) }

// The option accessors: what a policy was built with, one per option
// parameter. They are for the packages that write a policy back out or
// derive its rules (strategy, internal/rules, schemafile, and the test
// model, which re-derives them); every other package asks the policy what
// the family does (behaviour.go). internal/doccheck's
// TestOptionAccessorsStayInTheirPackages finds every zero-argument Policy
// method of this file and fails on a call to one outside those packages.

// Versions is N for a sequence family, or the union max-versions limit of an
// age family (zero when there is none).
func (p Policy) Versions() int { return p.versions }

// IsSingleValue reports whether writes replace the column's older cells.
func (p Policy) IsSingleValue() bool { return p.singleValue }

// IdleTTL is the family's time-to-idle (WithIdleTTL), zero when it has
// none.
func (p Policy) IdleTTL() time.Duration { return p.idleTTL }

// IdleDebounce is the family's time-to-idle debounce as a fraction of its
// idle TTL (WithIdleTTL's debounce; zero when it has no idle TTL).
func (p Policy) IdleDebounce() float64 { return p.debounce }

// MaxTTL is the cap on a cell's TTL (zero: none).
func (p Policy) MaxTTL() time.Duration { return p.maxTTL }

// ClampsTTL reports whether a TTL over MaxTTL is lowered to it rather than
// refused.
func (p Policy) ClampsTTL() bool { return p.clampTTL }

// HasWriteTime reports whether the family records each cell's real write
// time in a companion cell.
func (p Policy) HasWriteTime() bool { return p.writeTime }

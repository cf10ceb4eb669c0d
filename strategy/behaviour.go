package strategy

import "time"

// What a family does, asked of its policy. The option accessors
// (options.go: Versions, IsSingleValue, IdleTTL, IdleDebounce, MaxTTL,
// ClampsTTL, HasWriteTime) report what the policy was built with: they are
// for the packages that write a policy back out or derive its rules
// (strategy, internal/rules, schemafile, and the test model, which
// re-derives them). Every other package asks one of the questions below
// (or DefaultTTL, MaxAge, GCPolicy and the timestamp methods), so that a
// new option changes an answer here, not a switch in each package that
// needs it (CONTRIBUTING.md, "Adding a strategy option, end to end";
// internal/doccheck's TestOptionAccessorsStayInTheirPackages keeps it so).

// VersionLimit is the most cells a column keeps, newest first: its GC
// rule's max versions (n for a sequence family, WithMaxVersions's n for an
// age family); zero when the family keeps any number. A column's cell
// beyond the limit is not live, whatever its age.
func (p Policy) VersionLimit() int { return p.versions }

// ExpiryOffset is how far a cell's expiry lies after its timestamp: D for
// a default-expiry family, zero for a one-second family (its timestamp is
// the expiry instant) and for families whose cells do not expire by age.
// A cell that must expire at instant e is written at ms(e - ExpiryOffset).
func (p Policy) ExpiryOffset() time.Duration {
	if p.kind == KindDefaultExpiry {
		return p.defaultTTL
	}
	return 0
}

// HasCompanions reports whether every cell of the family has a write-time
// companion (WithWriteTime) in the reserved qualifiers: whatever rewrites
// or moves a cell does the same to its companion (WriteTimeColumn), and
// reads hide the reserved qualifiers (Reserved).
func (p Policy) HasCompanions() bool { return p.writeTime }

// Reserved reports whether column is one of bttl's own in the family: a
// qualifier from ReservedQualifierStart on, in a family with write-time
// companions (docs/design.md#write-time). Reads hide it and writes to it
// are refused.
func (p Policy) Reserved(column string) bool {
	return p.writeTime && len(column) >= len(ReservedQualifierStart) && column[:len(ReservedQualifierStart)] == ReservedQualifierStart
}

// ReplacesColumn reports whether a write to a column replaces its older
// cells in the same atomic mutation (SingleValue): so does anything that
// rewrites a cell in the family.
func (p Policy) ReplacesColumn() bool { return p.singleValue }

// RefreshesOnRead reports whether a cell read through bttl may be
// refreshed (time-to-idle, WithIdleTTL; NeedsIdleRefresh says which).
func (p Policy) RefreshesOnRead() bool { return p.idleTTL > 0 }

// TTLCap is the longest TTL a cell of the family may have, zero when there
// is no cap (WithMaxTTL), and whether a longer TTL is lowered to it (true)
// or refused with ErrTTLTooLong (false).
func (p Policy) TTLCap() (limit time.Duration, clamps bool) { return p.maxTTL, p.clampTTL }

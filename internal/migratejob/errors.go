package migratejob

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Every error New, Plan.Validate and ParseTTLRule return
// for bad input wraps one of them, before any RPC.
var (
	// ErrInvalidPlan: a plan that cannot run (see *PlanError).
	ErrInvalidPlan = errors.New("bttl: invalid migration plan")
	// ErrInvalidTTLRule: a TTL rule that does not parse or can never
	// apply (see *TTLRuleError).
	ErrInvalidTTLRule = errors.New("bttl: invalid TTL rule")
)

// PlanError names the field of a Plan that is wrong and why.
type PlanError struct {
	Field  string // the Plan field, e.g. "WrittenBefore"
	Reason string
}

func (e *PlanError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrInvalidPlan, e.Field, e.Reason)
}

func (e *PlanError) Unwrap() error { return ErrInvalidPlan }

// TTLRuleError names a TTL rule (as written, or its index) and what is
// wrong with it.
type TTLRuleError struct {
	Rule   string // the rule's text, or "rule N" for a Go value
	Reason string
}

func (e *TTLRuleError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrInvalidTTLRule, e.Rule, e.Reason)
}

func (e *TTLRuleError) Unwrap() error { return ErrInvalidTTLRule }

// ErrExpiredCount: a run told to delete expired cells (DeleteExpired)
// counted another number of them than Plan.ExpectExpired; nothing was
// written (see *ExpiredCountError).
var ErrExpiredCount = errors.New("bttl: expired cells counted differ from the count expected")

// ExpiredCountError is the count Run found against the one expected.
type ExpiredCountError struct {
	Expected, Found int64
	AsOf            time.Time
	// Restarted: the checkpoint records an earlier run of the job, which
	// deleted Deleted cells; Found plus Deleted is then at most Expected.
	Restarted bool
	Deleted   int64
}

func (e *ExpiredCountError) Error() string {
	if e.Restarted {
		return fmt.Sprintf("%v: %d cell(s) expired as of %s left and %d deleted by earlier runs of this job (its checkpoint), more than the %d expected: nothing written; a dry run with the same flags gives the current count",
			ErrExpiredCount, e.Found, formatTime(e.AsOf), e.Deleted, e.Expected)
	}
	return fmt.Sprintf("%v: %d cell(s) expired as of %s, expected %d: nothing written; a dry run with the same flags gives the current count",
		ErrExpiredCount, e.Found, formatTime(e.AsOf), e.Expected)
}

func (e *ExpiredCountError) Unwrap() error { return ErrExpiredCount }

package migrate

import (
	"errors"
	"fmt"
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

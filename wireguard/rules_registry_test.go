package wireguard_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/bttl/bttl/internal/rules"
	"github.com/bttl/bttl/wireguard"
)

// Every rule name the guard exports is a row of bttl's one refusal
// registry, which gives its metric reason: the guard has no vocabulary of
// its own.
func TestEveryRuleIsARegistryRow(t *testing.T) {
	for _, rule := range []string{
		wireguard.RuleServerTimestamp, wireguard.RuleExpiredOnArrival, wireguard.RuleBeforeEpoch, wireguard.RuleInvalidSequence,
		wireguard.RuleServerAssignedTimestamp, wireguard.RuleUnknownFamily, wireguard.RuleTTLTooLong, wireguard.RuleReservedColumn,
		wireguard.RuleSessionDataPlane, wireguard.RuleUnclassifiable, wireguard.RuleUndeclaredMaterializedView, wireguard.RuleSQL,
		wireguard.RuleSchemaMismatch, wireguard.RuleVerifyProbe, wireguard.RuleNotInstalled,
	} {
		assert.NotNil(t, rules.ByRule(rule), "rule %q has no registry row", rule)
	}
}

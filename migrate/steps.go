package migrate

import (
	"fmt"

	"github.com/bttl/bttl/strategy"
)

// Steps is the order of steps that moves a live system (writers and
// readers running) onto the plan's target without losing a live cell or
// returning an expired one through bttl; the migration is one of them.
// docs/design.md#migrate explains each.
func (p Plan) Steps() []string {
	f, t := p.Family, p.target()
	if p.inPlace() {
		return []string{
			fmt.Sprintf("switch every writer of family %q to bttl with the %s schema (a TTL per cell or a default TTL); until the rule is applied, open with ttlclient.WithoutVerify (or guard plain clients with wireguard). The instant the last one switched is -written-before", f, p.To),
			"keep readers as they are (plain reads, or bttl with the current schema): a bttl reader with the one-second schema would hide every cell not migrated yet",
			"run bttl migrate -written-before <that instant>; rerun it until it reports nothing to migrate (a cell changed meanwhile is picked up by the next run)",
			fmt.Sprintf("bttl apply the %s rule (max age 1s): its scan finds no timestamp at or before now once expired cells are deleted (with -expired keep, or bttl writers using TTLs shorter than the gap between migrate and apply, it needs -force, which then hides and collects only expired cells provided the last migrate run left no cell unmoved)", strategy.OneSecond()),
			"switch readers to bttl with the one-second schema, and drop WithoutVerify from the writers (bttl verify passes)",
		}
	}
	steps := []string{
		fmt.Sprintf("bttl apply a schema that adds family %q with the %s policy (creating a family deletes nothing; family %q keeps its rule)", t, p.To, f),
		fmt.Sprintf("run bttl migrate -to-family %s: it copies every live cell of %q to %q at the timestamp that keeps its expiry, while writers still write %q", t, f, t, f),
		fmt.Sprintf("switch every writer to write %q through bttl with the %s schema", t, p.To),
		fmt.Sprintf("run bttl migrate -to-family %s again: it copies what writers put in %q during the first run, and finds the rest copied; with %q no longer written, a further run reports nothing to copy", t, f, f),
		fmt.Sprintf("bttl verify the final schema and switch readers to %q (between the writer switch and this step, readers of %q miss the writes made to %q)", t, f, t),
		fmt.Sprintf("remove %q from the schema and drop it: every live cell is in %q", f, t),
	}
	return steps
}

package migratejob

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
			fmt.Sprintf("switch every writer of family %q to bttl with the %s schema (a TTL per cell or a default TTL; with write_time: true their companions later prove which cells they wrote); until the rule is applied, open with ttlclient.WithoutVerify (or guard plain clients with wireguard). Note when the first one switched (-first-switch) and when the last one did (-written-before)", f, p.To),
			"keep readers as they are (plain reads, or bttl with the current schema): a bttl reader with the one-second schema would hide every cell not migrated yet",
			"at least -clock-skew after -written-before, run bttl migrate -first-switch <first> -written-before <last>, -dry-run first; rerun it until it exits 0 (with -checkpoint, a rerun reads again every key range where a cell was left; sharded, every shard: bttl migrate merge of their -json reports says when the job is done). A cell listed as ambiguous (stamped while writers were switching, with no companion proving it a bttl write) is never touched: decide it (bttl migrate resolve moves or deletes one, pinned; -json lists them all), or vouch with -write-time-complete that every bttl writer recorded write times",
			fmt.Sprintf("only once bttl migrate exits 0 (no cell left unmoved or ambiguous), bttl apply -table <table> -family %s -written-before <last> (the same table, family, instant and -clock-skew: the evidence is about this family's writers only) the %s rule (max age 1s). Its scan counts the cells stamped after -written-before plus the skew and at or before now as expiry instants already passed (bttl cells and moved cells that expired since, collected as expired) and refuses those at or before it: the expired cells migrate kept. Check the expired examples migrate listed (a real write time after -written-before among them means -written-before was too early: rerun migrate with the right instant), then either delete them with bttl migrate -expired delete -expect-expired N -expired-as-of T (the count and instant its dry run printed) and apply, or apply -force, which collects them", f, strategy.OneSecond()),
			"switch readers to bttl with the one-second schema, and drop WithoutVerify from the writers (bttl verify passes)",
		}
	}
	steps := []string{
		fmt.Sprintf("bttl apply a schema that adds family %q with the %s policy (creating a family deletes nothing; family %q keeps its rule)", t, p.To, f),
		fmt.Sprintf("make every writer of %q build its deletions and overwrites with migrate.Mirror (a deletion, a column deleted to overwrite it, a Set at a stored timestamp, an Expire re-stamp: each also removes the copy in %q), from before the first copy until %q is dropped: the copy cannot see a deletion, and a copied cell whose source is gone would be served by %q", f, t, f, t),
		fmt.Sprintf("run bttl migrate -to-family %s: it copies every live cell of %q to %q at the timestamp that keeps its expiry, while writers still write %q", t, f, t, f),
		fmt.Sprintf("run bttl migrate -to-family %s -check-copy: every cell of %q must be the copy of a stored cell of %q (exit 0); a cell it lists is a deletion no mirror carried: fix that writer, delete the cell with bttl migrate resolve -delete, and check again", t, t, f),
		fmt.Sprintf("switch every writer to write %q through bttl with the %s schema; their deletions and overwrites of copied cells go through migrate.Mirror (SetTarget, DeleteTargetTimestampRange) until %q is dropped, or the next copy brings the source back", t, p.To, f),
		fmt.Sprintf("run bttl migrate -to-family %s again: it copies what writers put in %q before they switched, and finds the rest copied; with %q no longer written, a further run reports nothing to copy", t, f, f),
		fmt.Sprintf("bttl verify the final schema and switch readers to %q (between the writer switch and this step, readers of %q miss the writes made to %q)", t, f, t),
		fmt.Sprintf("remove %q from the schema and drop it: every live cell is in %q", f, t),
	}
	return steps
}

// NextStep is what follows an in-place run that found nothing to migrate:
// the step after the migration ("" for a copy, whose next step depends on
// whether writers switched already).
func (p Plan) NextStep() string {
	if p.inPlace() {
		return p.Steps()[3]
	}
	return ""
}

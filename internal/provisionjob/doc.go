// Package provisionjob is provision's engine: the plan of a table's
// families, GC rules and change stream, the adoption scans that refuse a
// change that would delete or hide stored cells (*AdoptionError), and
// Execute. Package provision is its public face (New, Plan, PlanAndCheck,
// CheckAdoptions, Execute, Apply, the options, the plan and its errors);
// the CLI also calls what only it needs: CheckUnchanged and WithoutImpact
// (bttl verify). See package provision and docs/design.md#adoption.
package provisionjob

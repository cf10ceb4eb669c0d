package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/bttl/bttl/strategy"
)

// The command table is the one list of bttl's commands, as cbt keeps one:
// the top-level help, 'bttl help NAME' and 'NAME -h' are printed from it,
// and doc.go and docs/cli.md's command list are generated from it.
//go:generate go test -run TestGeneratedDocs . -update

// command is one entry of the table.
type command struct {
	// name is the words that invoke it: "audit", or "audit merge" for a
	// subcommand (the longest name the arguments start with is the one
	// run; nothing else special-cases a subcommand).
	name string
	// synopsis is the usage forms, each what follows "bttl NAME".
	synopsis []string
	// short is the command's line in the command list; help its long
	// description.
	short, help string
	needsSchema bool
	// offline commands read files only: no -project or -instance, no
	// clients, unless online says their arguments need them after all.
	offline bool
	online  func(args []string) bool
	// args names the positional arguments ("" when it takes none).
	args string
	// setup defines the command's flags on fs and returns what to run
	// once they are parsed.
	setup func(fs *flag.FlagSet) invocation
}

// invocation is a parsed command: check validates flag combinations
// (exit 2) before any client exists, checkSchemas what the schema file
// decides, also before; run does the work.
type invocation struct {
	check func() error
	// checkSchemas validates what depends on the schema file (exit 2),
	// once it is read and before any client exists.
	checkSchemas func(schemas map[string]strategy.Schema) error
	run          func(e *env) int
	// writes reports whether the run writes to the instance's data
	// (moves, checkpoints, reports) or reads bttl's records back: its
	// write profile is checked first (checkWriteProfile).
	writes func() bool
	// readsRecords: the run reads bttl's records back and writes nothing
	// (the merges, checkpoint list): its write profile is checked as a
	// reader, which needs no transactions.
	readsRecords bool
}

// commands is the command table, in the order help lists it.
func commands() []command {
	return []command{verifyCommand, planCommand, applyCommand, auditCommand, auditMergeCommand, migrateCommand, migrateMergeCommand, migrateResolveCommand,
		checkpointListCommand, checkpointRmCommand, initCommand, lookupCommand, readCommand, expireCommand, watchCommand, helpCommand()}
}

// findCommand returns the command args start with (the longest name that
// matches) and the arguments after its name.
func findCommand(args []string) (command, []string, bool) {
	var best command
	n := 0
	for _, c := range commands() {
		words := strings.Fields(c.name)
		if len(words) > n && len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
			best, n = c, len(words)
		}
	}
	return best, args[n:], n > 0
}

// helpCommand is 'bttl help [COMMAND]': a function, since its run looks
// the command up in the table it is part of.
func helpCommand() command {
	return command{
		name: "help", offline: true, args: "[COMMAND]",
		synopsis: []string{"[COMMAND]"},
		short:    "print bttl's help, or a command's (as -h after it does)",
		help: `Prints bttl's help: the commands and the global flags. With a command's
name (two words for a subcommand: bttl help audit merge) it prints that
command's usage, description and flags, as -h after the command does.
`,
		setup: func(fs *flag.FlagSet) invocation {
			return invocation{run: func(e *env) int {
				if len(e.args) == 0 {
					writeTopHelp(e.stdout)
					return exitOK
				}
				c, rest, ok := findCommand(e.args)
				if !ok || len(rest) > 0 {
					fmt.Fprintf(e.stderr, "bttl help: unknown command %q; run 'bttl -h' for the list\n", strings.Join(e.args, " "))
					return exitError
				}
				writeCommandHelp(e.stdout, c)
				return exitOK
			}}
		},
	}
}

// usage is the command's usage lines, each form "bttl NAME ..." wrapped
// to fit 80 columns after "usage: ".
func (c command) usage() []string {
	forms := c.synopsis
	if len(forms) == 0 {
		forms = []string{strings.TrimSpace("[flags] " + c.args)}
	}
	var out []string
	for _, f := range forms {
		out = append(out, wrapSynopsis("bttl "+c.name+" ", f, 80-len("usage: "))...)
	}
	return out
}

// wrapSynopsis is head+form, wrapped at width columns between the form's
// top-level words and bracketed groups, continuation lines indented past
// head.
func wrapSynopsis(head, form string, width int) []string {
	var groups []string
	depth, start := 0, 0
	for i, r := range form {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case ' ':
			if depth == 0 {
				groups = append(groups, form[start:i])
				start = i + 1
			}
		}
	}
	groups = append(groups, form[start:])
	var lines []string
	line := head
	for i, g := range groups {
		if i > 0 && len(line)+1+len(g) > width {
			lines = append(lines, line)
			line = strings.Repeat(" ", len(head))
		} else if i > 0 {
			line += " "
		}
		line += g
	}
	return append(lines, line)
}

// commandList is the command list of the top-level help: a name column
// as wide as the longest name, then the short description.
func commandList(indent string) string {
	width := 0
	for _, c := range commands() {
		width = max(width, len(c.name))
	}
	var b strings.Builder
	for _, c := range commands() {
		fmt.Fprintf(&b, "%s%-*s  %s\n", indent, width, c.name, c.short)
	}
	return b.String()
}

const topIntro = `bttl checks and provisions the GC rules bttl's TTL strategies need, audits
what tables hold, migrates stored cells onto a strategy, and shows what a
read through bttl hides.
`

const topUsage = `usage: bttl [global flags] <command> [flags] [arguments]

Global flags may also follow the command: bttl verify -project p -instance i -schema s.yaml
`

const credentialsHelp = `Credentials: Application Default Credentials (gcloud auth application-default
login, or GOOGLE_APPLICATION_CREDENTIALS), or -creds FILE, a service account
key file, as cbt takes. BIGTABLE_EMULATOR_HOST points bttl at an emulator.
$HOME/.cbtrc gives defaults to the global flags the command line leaves
unset, as for cbt ("key = value" lines: project, instance, creds, timeout,
data-endpoint, admin-endpoint, cert-file, user-agent).
`

func writeTopHelp(w io.Writer) {
	fmt.Fprint(w, topIntro+"\n"+topUsage+"\ncommands (bttl help <command> prints a command's flags):\n"+commandList("  ")+"\n"+credentialsHelp)
	fmt.Fprintln(w, "\nglobal flags:")
	fs := flagSet("bttl", w)
	newGlobals().define(fs)
	fs.PrintDefaults()
	fmt.Fprint(w, "\n"+exitCodes)
}

func writeCommandHelp(w io.Writer, c command) {
	for i, u := range c.usage() {
		if i == 0 {
			fmt.Fprintf(w, "usage: %s\n", u)
		} else {
			fmt.Fprintf(w, "       %s\n", u)
		}
	}
	fmt.Fprintf(w, "\n%s", c.help)
	fs := flagSet("bttl "+c.name, w)
	c.setup(fs)
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprintln(w, "\nflags:")
		fs.PrintDefaults()
	}
	fmt.Fprint(w, "\nand the global flags (bttl -h)\n\n"+exitCodes)
}

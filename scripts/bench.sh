#!/usr/bin/env bash
# Regenerates BENCHMARKS.md: runs the raw-vs-ttlclient benchmarks (the
# sides interleaved in one process, on the in-process bttest server and on
# cbtemulator), summarises them with benchstat (golang.org/x/perf: medians
# with 95% confidence intervals, and A/B comparisons with p-values) and
# takes CPU profiles. Run it on an otherwise idle machine: the interleaving makes the
# ratios fair under load, not precise.
#
#   scripts/bench.sh               # run everything (about 40 min on an idle 2-core machine)
#   RUN=0 scripts/bench.sh         # only rebuild BENCHMARKS.md from docs/bench/
#   PARTS=writes scripts/bench.sh  # only the writes: pure build, Apply and
#                                  # ApplyBulk (Mutation and TableAPI paths), scale
#   PARTS=reads scripts/bench.sh   # only the reads on both servers
#   COUNT=10 scripts/bench.sh      # more runs per benchmark (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin:$(go env GOPATH)/bin"

RUN=${RUN:-1}
PARTS=${PARTS:-"writes reads"}
OUT=docs/bench
mkdir -p "$OUT"
# Rebuilding the report only (RUN=0), the commands shown carry the count
# the outputs were made with.
if [ "$RUN" = 0 ] && [ -z "${COUNT:-}" ]; then
  COUNT=$(sed -n 's/^count: //p' "$OUT/writes-machine.txt" 2>/dev/null)
fi
COUNT=${COUNT:-5}

BUILD_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkInterleavedBuild\$' -benchtime 1s -count $COUNT"
WRITES_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServersWrites\$' -benchtime 2s -count $COUNT -timeout 120m"
SCALE_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServersScale\$' -benchtime 3x -count $COUNT -timeout 120m"
TABLEAPI_BUILD_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkTableAPIBuild\$' -benchtime 1s -count $COUNT -benchmem"
READS_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServers\$' -benchtime 3s -count $COUNT -timeout 120m"
PROF_BUILD_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkMutationBuild\$/strategy=default-expiry/impl=ttl' -benchtime 300000x -cpuprofile $OUT/build.cpu -o $OUT/ttlclient.test"
PROF_BULK_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServersWrites\$/server=bttest/schema=4-family/op=ApplyBulk' -benchtime 10s -cpuprofile $OUT/bulk.cpu -o $OUT/ttlclient.test"
PROF_SCALE10K_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServersScale\$/server=bttest/rows=10000\$' -benchtime 30x -cpuprofile $OUT/scale.cpu -o $OUT/ttlclient.test"
PROF_SCALE100K_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServersScale\$/server=bttest/rows=100000\$' -benchtime 3x -cpuprofile $OUT/scale.cpu -o $OUT/ttlclient.test"
PROF_READS_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServers\$/server=bttest/schema=4-family/op=ReadRows' -benchtime 5x -cpuprofile $OUT/reads.cpu -o $OUT/ttlclient.test"

has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

machine() {
  echo "goarch: $(go env GOARCH)"
  echo "cpus: $(nproc)"
  echo "model: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "go: $(go env GOVERSION)"
  echo "count: $COUNT"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs/bench' ':!BENCHMARKS.md' ':!scripts/benchmarks-notes-*.md' || echo ' (with uncommitted changes)')"
  echo "from: $1"
  echo "to: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
}

top() { go tool pprof -top -cum "$OUT/ttlclient.test" "$OUT/$1.cpu" 2>/dev/null | head -"$2"; }

if [ "$RUN" = 1 ] && has writes; then
  start=$(date -u +%Y-%m-%dT%H:%MZ)
  eval "$BUILD_CMD" | tee "$OUT/build.txt"
  eval "$WRITES_CMD" | tee "$OUT/writes.txt"
  eval "$SCALE_CMD" | tee "$OUT/scale.txt"
  eval "$TABLEAPI_BUILD_CMD" | tee "$OUT/tableapi-build.txt"
  machine "$start" > "$OUT/writes-machine.txt"
  eval "$PROF_BUILD_CMD" > /dev/null
  top build 40 > "$OUT/build.pprof.txt"
  eval "$PROF_BULK_CMD" > /dev/null
  top bulk 30 > "$OUT/bulk.pprof.txt"
  # Each side's own CPU: the closures of BenchmarkServersWrites' ApplyBulk
  # are func1.1.4.1 (raw), .2 (ttl) and .3 (api), in source order.
  for side in 1:raw 2:ttl 3:api; do
    echo "== ${side#*:}: go tool pprof -top -cum -focus 'BenchmarkServersWrites.func1.1.4.${side%%:*}\$'"
    go tool pprof -top -cum -focus "BenchmarkServersWrites.func1.1.4.${side%%:*}\$" "$OUT/ttlclient.test" "$OUT/bulk.cpu" 2>/dev/null |
      grep -E "func1.1.4.${side%%:*}\$|Mutation\)\.Set|Mutation\)\.record|Table\)\.Timestamp|ttlclient\.\(\*Table\)\.(ApplyBulk|build|convert)|tableAPI\.ApplyBulk|bigtable\.\(\*Table\)\.ApplyBulk\$|Mutation\)$" || true
  done > "$OUT/bulk-sides.txt"
  eval "$PROF_SCALE10K_CMD" > /dev/null
  top scale 45 > "$OUT/scale-10k.pprof.txt"
  eval "$PROF_SCALE100K_CMD" > /dev/null
  top scale 45 > "$OUT/scale-100k.pprof.txt"
  rm -f "$OUT/ttlclient.test" "$OUT"/*.cpu
fi

if [ "$RUN" = 1 ] && has reads; then
  start=$(date -u +%Y-%m-%dT%H:%MZ)
  eval "$READS_CMD" | tee "$OUT/reads.txt"
  machine "$start" > "$OUT/reads-machine.txt"
  eval "$PROF_READS_CMD" > /dev/null
  top reads 40 > "$OUT/reads.pprof.txt"
  rm -f "$OUT/ttlclient.test" "$OUT"/*.cpu
fi

# benchstat, as Go users read benchmarks; installed from the module proxy
# when missing.
if ! command -v benchstat >/dev/null; then
  go install golang.org/x/perf/cmd/benchstat@latest
fi

# stat FILTER ROW ARGS...: a benchstat summary, the command first. The
# benchmarks report each side's time (raw-ns/op, ttl-ns/op, ...) and the
# interleaved ratios (ttl/raw, ...) as custom units: benchstat summarises
# them like any other (median of the runs, 95% confidence interval).
stat() {
  local filter=$1 row=$2
  shift 2
  printf '```sh\nbenchstat -filter '"'"'%s'"'"' -row '"'"'%s'"'"' %s\n```\n\n```text\n' "$filter" "$row" "$*"
  benchstat -filter "$filter" -row "$row" "$@" | sed -E '/^(goos|goarch|pkg|cpu): /d'
  printf '```\n'
}

{
  cat <<TITLE
# Benchmarks: ttlclient against the raw client

Generated by \`scripts/bench.sh\` (do not edit by hand: the analysis comes
from the \`scripts/benchmarks-notes-*.md\` files, the figures from the raw
outputs in \`docs/bench/\`).

TITLE
  cat scripts/benchmarks-notes-summary.md
  cat <<HOW

## How they are run

Every benchmark runs its sides in one loop, in one process, against one
server (the in-process \`bttest\` and the gcloud \`cbtemulator\`, each in
turn), rotating which side goes first, and times each side: raw is the
plain \`*bigtable.Table\`, ttl the library's \`ttlclient.Table\` with its
\`Mutation\`, api the library through \`Table.API()\` with the client's own
\`*bigtable.Mutation\` (its timestamps from \`Table.Timestamp\`), naive the
plain client sending the filter a user writes by hand from Bigtable's docs
(\`Chain(FamilyFilter("^fam\$"), TimestampRange or CellsPerColumn)\` per
managed family and a \`FamilyFilter\` per unmanaged one, interleaved). Each
side builds its mutations inside the timed call, as a caller would. Each
side's time and the ratios of the sides (ttl/raw, api/ttl, ttl/naive, ...,
taken within each run) are reported as custom units, and the tables are
benchstat's: the median of the $COUNT runs with its 95% confidence
interval, and where two sizes or two builds are compared, the change with
its p-value ("~" when it is likely noise). The one thing benchstat does
not do, judging each figure against its target, is the summary's, written
from these tables (\`scripts/benchmarks-notes-summary.md\`).

\`\`\`sh
$BUILD_CMD
$WRITES_CMD
$SCALE_CMD
$TABLEAPI_BUILD_CMD
$READS_CMD
go install golang.org/x/perf/cmd/benchstat@latest   # the summaries below
\`\`\`

Machine and times of the writes and scale runs (\`docs/bench/writes-machine.txt\`):

\`\`\`
$(cat "$OUT/writes-machine.txt")
\`\`\`

Of the reads (\`docs/bench/reads-machine.txt\`):

\`\`\`
$(cat "$OUT/reads-machine.txt")
\`\`\`

## Writes

### Pure build of a 10-cell mutation (no I/O)

HOW
  stat '.unit:(ttl/raw OR api/ttl OR raw-ns/op OR ttl-ns/op OR api-ns/op OR raw-allocs/op OR ttl-allocs/op OR api-allocs/op OR raw-B/op OR ttl-B/op)' /strategy "$OUT/build.txt"
  echo
  if [ -f "$OUT/build-before.txt" ]; then
    echo "Against the build before the cells were recorded as the protos sent: commit $(sed -n 's/^# commit \([0-9a-f]*\).*/\1/p' "$OUT/build-before.txt"), the same machine and benchmark (\`docs/bench/build-before.txt\`):"
    echo
    stat '.unit:(ttl/raw OR ttl-allocs/op)' /strategy before="$OUT/build-before.txt" after="$OUT/build.txt"
    echo
  fi
  echo "### bttl's own work before the RPC, 10 cells, the mutation built once outside the loop"
  echo
  echo "\`BenchmarkTableAPIBuild\`: what \`Apply\` does before its RPC with a \`ttlclient.Mutation\` already built (\`impl=ttl\`: a fresh one each time; \`impl=ttl-again\`: the same one applied again; both stamp its changes and build the \`bigtable.Mutation\` sent with the client's own \`Set\`, so the client's build of those cells is included), without the caller's build or the server (\`docs/bench/tableapi-build.txt\`). \`Table.API()\`'s writes have no build of bttl's: they are rewritten on the wire."
  echo
  echo '\`\`\`sh'
  echo "$TABLEAPI_BUILD_CMD"
  echo '\`\`\`'
  echo
  printf '```sh\nbenchstat -col /impl %s\n```\n\n```text\n' "$OUT/tableapi-build.txt"
  benchstat -col /impl "$OUT/tableapi-build.txt" | sed -E '/^(goos|goarch|pkg|cpu): /d'
  printf '```\n'
  echo
  echo "### Apply (1 row x 10 cells) and ApplyBulk (100 rows x 10 cells) on both servers"
  echo
  stat '.unit:(ttl/raw OR ttl/raw-cpu OR api/ttl OR api/raw OR api/raw-cpu)' '/server /schema /op' "$OUT/writes.txt"
  echo
  cat scripts/benchmarks-notes-writes.md
  echo
  echo "## Reads on both servers"
  echo
  echo "ReadRow (one row of 10 cells), ReadRows (1,000 rows of 10 cells) and, as a check of the write path, ApplyBulk (100 rows of 10 cells)."
  echo
  stat '.unit:(ttl/naive OR ttl/raw)' '/server /schema /op' "$OUT/reads.txt"
  echo
  cat scripts/benchmarks-notes-reads.md
  echo
  echo "## Scale: ReadRows at 10,000 and 100,000 rows"
  echo
  echo "ReadRows of rows of one cell (default expiry alone): each side's time per cell, and the interleaved ratios, at 10,000 rows and at 100,000 (the \"vs base\" column: the change from 10,000 to 100,000, with its p-value). The target: ttl's per-cell cost grows no more than raw's, which the interleaved ttl/raw shows best (the absolute times of the two sizes are measured minutes apart)."
  echo
  printf '```sh\nbenchstat -filter '"'"'%s'"'"' -col /rows -row /server %s\n```\n\n```text\n' '.unit:(raw-ns/cell OR naive-ns/cell OR ttl-ns/cell OR ttl/raw OR ttl/naive OR gc-cpu-ns/cell)' "$OUT/scale.txt"
  benchstat -filter '.unit:(raw-ns/cell OR naive-ns/cell OR ttl-ns/cell OR ttl/raw OR ttl/naive OR gc-cpu-ns/cell)' -col /rows -row /server "$OUT/scale.txt" | sed -E '/^(goos|goarch|pkg|cpu): /d'
  printf '```\n'
  echo
  cat scripts/benchmarks-notes-scale.md
  echo
  # Measured by hand (BenchmarkMigratePace; the command is in the notes).
  cat scripts/benchmarks-notes-migrate.md
  echo
  echo "## Audit pace"
  echo
  cat scripts/benchmarks-notes-audit.md
  echo
  printf '```sh\nbenchstat -filter '"'"'%s'"'"' 10-cells-per-row=%s 1-cell-per-row=%s\n```\n\n```text\n' '.unit:(audit/count OR audit-bytes/read OR bttl-audit-s OR cbt-count-s OR bttl-audit-bytes-s OR cbt-read-s OR bttl-audit-cpu-s OR cbt-count-cpu-s OR bttl-audit-server-cpu-s OR cbt-count-server-cpu-s OR bttl-audit-bytes-server-cpu-s)' "$OUT/audit-pace-10.txt" "$OUT/audit-pace-1.txt"
  benchstat -filter '.unit:(audit/count OR audit-bytes/read OR bttl-audit-s OR cbt-count-s OR bttl-audit-bytes-s OR cbt-read-s OR bttl-audit-cpu-s OR cbt-count-cpu-s OR bttl-audit-server-cpu-s OR cbt-count-server-cpu-s OR bttl-audit-bytes-server-cpu-s)' 10-cells-per-row="$OUT/audit-pace-10.txt" 1-cell-per-row="$OUT/audit-pace-1.txt" | sed -E '/^(goos|goarch|pkg|cpu): /d'
  printf '```\n'
  echo
  # Measured by hand (BenchmarkAuditVsReadRows; the command is in the notes).
  echo "## Audit against ReadRows (issue 35)"
  echo
  cat scripts/benchmarks-notes-audit-readrows.md
  echo
  AVR_FILTER='.unit:(audit/readrows OR audit-progress/readrows OR bttl-audit-s OR bttl-audit-progress-s OR readrows-strip-s OR bttl-audit-cpu-s OR bttl-audit-progress-cpu-s OR readrows-strip-cpu-s OR bttl-audit-server-cpu-s OR bttl-audit-progress-server-cpu-s OR readrows-strip-server-cpu-s)'
  printf '```sh\nbenchstat -filter '"'"'%s'"'"' %s\n```\n\n```text\n' "$AVR_FILTER" "$OUT/audit-vs-readrows.txt"
  benchstat -filter "$AVR_FILTER" "$OUT/audit-vs-readrows.txt" | sed -E '/^(goos|goarch|pkg|cpu): /d'
  printf '```\n'
  cat <<PROF

## Profiles

\`go tool pprof -top -cum\` of each command, first lines.

Build and rewrite of a 10-cell mutation (ttl, default expiry):

\`\`\`sh
$PROF_BUILD_CMD
\`\`\`

\`\`\`
$(cat "$OUT/build.pprof.txt")
\`\`\`

ApplyBulk of 100 x 10 on bttest, 4-family schema, raw, ttl and api interleaved,
and each side's own CPU (\`docs/bench/bulk-sides.txt\`):

\`\`\`sh
$PROF_BULK_CMD
\`\`\`

\`\`\`
$(cat "$OUT/bulk.pprof.txt")
\`\`\`

\`\`\`
$(cat "$OUT/bulk-sides.txt")
\`\`\`

ReadRows of 1,000 x 10 on bttest, 4-family schema, raw, naive and ttl interleaved:

\`\`\`sh
$PROF_READS_CMD
\`\`\`

\`\`\`
$(cat "$OUT/reads.pprof.txt")
\`\`\`

ReadRows at 10,000 and 100,000 rows on bttest (raw, naive and ttl; the profile includes loading the rows):

\`\`\`sh
$PROF_SCALE10K_CMD
$PROF_SCALE100K_CMD
\`\`\`

\`\`\`
$(cat "$OUT/scale-10k.pprof.txt")
\`\`\`

\`\`\`
$(cat "$OUT/scale-100k.pprof.txt")
\`\`\`

PROF
  # Measured by hand (BenchmarkPlanScan; the command is in the notes).
  cat scripts/benchmarks-notes-plan.md
  echo
  # Measured by hand (changestream/expiry's benchmarks; the command is in the notes).
  cat scripts/benchmarks-notes-expiry.md
  echo
  # Measured by hand (BenchmarkSessions; the command is in the notes).
  cat scripts/benchmarks-notes-sessions.md
  cat <<PROF

## Earlier measurements

Measurements of earlier code (issue 7's pairs, the split filter, the
write path before its cells were recorded as the protos sent) are in the
history of this file: \`git log -p -- BENCHMARKS.md\`.
PROF
} > BENCHMARKS.md
echo "wrote BENCHMARKS.md"

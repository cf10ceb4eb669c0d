#!/usr/bin/env bash
# Runs Google's Bigtable client conformance suite
# (github.com/googleapis/cloud-bigtable-clients-test, the version in go.mod)
# against every variant of the bttl test proxy, the raw client's proxy
# ("raw") being the baseline, and fails unless each variant passes every
# test the baseline passes, tests listed in known_failures.txt apart.
#
# The suite's test binary is built here from the Go module proxy (go test
# -c of the module's tests package); nothing prebuilt is downloaded.
#
# Usage: run.sh [variant...]   (default: all; raw always runs)
# Env:   CONFORMANCE_RUN  a go test -run regex to pass (default: every test)
#        CONFORMANCE_SKIP a go test -skip regex (default: the SQL tests, see
#                         README.md: the Go client's proxy has no ExecuteQuery)
set -euo pipefail
cd "$(dirname "$0")"

variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(ttlclient api wireguard guarded-ttlclient)
all=(raw "${variants[@]}")
run_re=${CONFORMANCE_RUN:-.}
skip_re=${CONFORMANCE_SKIP:-^TestExecuteQuery_}

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

start=$(date +%s)
echo "build: proxy and the suite's test binary"
# The module follows the library's requirements (replace ../..): a change
# there can need one here.
go mod tidy -diff >/dev/null || { echo "testsuite/testproxy: go.mod or go.sum is not tidy: run go mod tidy there"; go mod tidy -diff; exit 1; }
go vet .
go build -o "$work/testproxy" .
go test -c -o "$work/suite.test" github.com/googleapis/cloud-bigtable-clients-test/tests
echo "built in $(( $(date +%s) - start ))s"

# suite V OUT [RUN]: the suite against variant V's proxy, output to OUT.
# -test.timeout: a hung test (a call that never returns) fails the run
# with the goroutine dump instead of blocking CI.
suite() {
  ( cd "$work" && ./suite.test -test.v -test.count=1 -test.timeout 4m -test.run "${3:-$run_re}" -test.skip "$skip_re" \
      -proxy_addr "$(cat "$work/$1.addr")" >"$2" 2>&1 || true )
}

# Every variant runs at once: the suite spends its time waiting on its
# mock servers' deadlines and retries, not on the CPU.
suite_pids=()
for v in "${all[@]}"; do
  "$work/testproxy" -variant "$v" -port 0 -addr_file "$work/$v.addr" >"$work/$v.proxy.log" 2>&1 &
  pids+=($!)
done
for v in "${all[@]}"; do
  for _ in $(seq 100); do [ -s "$work/$v.addr" ] && break; sleep 0.1; done
  [ -s "$work/$v.addr" ] || { echo "proxy $v did not start:"; cat "$work/$v.proxy.log"; exit 1; }
  # The suite's status is read from its output: it fails where the baseline does too.
  suite "$v" "$work/$v.out" &
  suite_pids+=($!)
done
wait "${suite_pids[@]}"
echo "suite ran in $(( $(date +%s) - start ))s (build included)"

# Top-level results only: subtests are indented.
results() { sed -n "s/^--- $2: \([^ ]*\) .*/\1/p" "$work/$1.out" | sort -u; }
known=$(grep -v '^#' known_failures.txt | sed '/^[[:space:]]*$/d' | sort -u)
results raw PASS >"$work/baseline"
base=$(wc -l <"$work/baseline")
if [ "$base" -eq 0 ]; then
  echo "the baseline (raw) passed no test:"; tail -50 "$work/raw.out"; exit 1
fi
status=0
printf '%-18s %6s %6s %6s  %s\n' variant passed failed of "missing from the baseline's passes"
for v in "${all[@]}"; do
  pass=$(results "$v" PASS | wc -l)
  fail=$(results "$v" FAIL | wc -l)
  missing=$(comm -23 "$work/baseline" <(results "$v" PASS) | comm -23 - <(echo "$known"))
  printf '%-18s %6d %6d %6d  %s\n' "$v" "$pass" "$fail" "$base" "$(echo $missing)"
  retries=3
  for t in $missing; do
    # The suite's deadline tests measure whole seconds on a loaded
    # machine: a test missing from a variant runs again, alone, once (for
    # at most 3 tests a variant: more is no timing flake), and fails the
    # run only if it fails again. Both outcomes are printed.
    retries=$((retries - 1))
    [ $retries -ge 0 ] && suite "$v" "$work/$v.$t.out" "^$t\$"
    if [ $retries -ge 0 ] && grep -q "^--- PASS: $t " "$work/$v.$t.out"; then
      echo "   $v: $t failed with every variant running, passed run again alone (a timing flake):"
      awk -v t="$t" 'index($0, t) {p = 1} p && /^(===|---)/ && !index($0, t) {p = 0} p' "$work/$v.out" | head -20
      continue
    fi
    status=1
    echo "== $v: $t fails:"
    awk -v t="$t" 'index($0, t) {p = 1} p && /^(===|---)/ && !index($0, t) {p = 0} p' "$work/$v.out" | head -40
    echo "== $v: proxy log (tail)"; tail -20 "$work/$v.proxy.log"
  done
  if grep -q '^panic:' "$work/$v.out"; then
    status=1; echo "== $v: the suite crashed or timed out:"; grep -A3 '^panic:' "$work/$v.out"
  fi
done
[ $status -eq 0 ] && echo "conformance: every variant passes every test the raw client passes"
exit $status

#!/usr/bin/env bash
# Tries bttl on the newest cloud.google.com/go/bigtable the module proxy
# serves: copies the work tree to a temporary directory, upgrades the client
# there (go get ...@latest, which may raise other modules with it), then
# runs go vet, the client-version checks (ttlclient.CheckCompatibility) and
# the ttlclient and wireguard tests. It reports what it finds and always
# exits 0: a newer client that breaks a check is news for the maintainers,
# not a failure of the change under test (the module pins v1.58.0).
#
#   scripts/client-upgrade.sh             # from .ci/run, or by hand
#   UPGRADE_BUDGET=600 scripts/client-upgrade.sh
#   UPGRADE_VERSION=v1.57.0 scripts/client-upgrade.sh   # another version
#
# Every step has a timeout; the whole run is bounded by UPGRADE_BUDGET
# seconds (default 420). The summary is the last lines, prefixed
# "client-upgrade:".
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

budget=${UPGRADE_BUDGET:-420}
target=${UPGRADE_VERSION:-latest}
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }
summary=()
say() { summary+=("client-upgrade: $*"); }
finish() {
  printf '%s\n' "${summary[@]}"
  rm -rf "$tmp"
  exit 0
}

tmp=$(mktemp -d)
tar --exclude=.git -cf - . | tar -xf - -C "$tmp"
cd "$tmp"

pinned=$(go list -m -f '{{.Version}}' cloud.google.com/go/bigtable)
if ! out=$(timeout 120 go get "cloud.google.com/go/bigtable@$target" 2>&1); then
  echo "$out"
  say "could not fetch cloud.google.com/go/bigtable@$target (no module proxy?); nothing tried"
  finish
fi
latest=$(go list -m -f '{{.Version}}' cloud.google.com/go/bigtable)
say "pinned $pinned, $target on the proxy: $latest"
if [ "$latest" = "$pinned" ]; then
  say "the pinned version is the newest: the regular suite covers it"
  finish
fi
go mod tidy >/dev/null 2>&1 || true

if out=$(timeout "$(left)" go vet ./... 2>&1); then
  say "go vet: ok"
else
  echo "$out" | tail -40
  say "go vet: FAILED with $latest (above)"
fi

# The checks first and alone, so that their verdict is in the summary
# whatever the rest of the tests do.
if out=$(timeout "$(left)" go test -count=1 -run '^TestCheckCompatibilityPassesOnThisBuild$' -v ./ttlclient/ 2>&1); then
  say "ttlclient.CheckCompatibility: ok (every layout bttl reads is the one it knows)"
else
  echo "$out" | tail -40
  say "ttlclient.CheckCompatibility: FAILED with $latest: $(echo "$out" | grep -o 'bttl: cloud.google.com/go/bigtable.*' | head -1)"
fi

if [ "$(left)" -le 30 ]; then
  say "tests: not run (budget of ${budget}s spent)"
  finish
fi
if out=$(timeout "$(left)" go test -count=1 ./ttlclient/ ./wireguard/ 2>&1); then
  say "ttlclient and wireguard tests: ok"
else
  echo "$out" | grep -v '^ok ' | tail -60
  say "ttlclient and wireguard tests: FAILED or timed out with $latest (above)"
fi
say "took $(( $(date +%s) - start ))s of ${budget}s"
finish

#!/usr/bin/env bash
# contracts-check: the committed contracts/artifacts/*.json and
# contracts/bindings.go are exactly what the pinned toolchain builds from
# contracts/src. Builds into a temporary folder and compares; the working
# tree is never written. The bindings are always checked (Go only, no
# network); the artifacts need contracts/node_modules (`cd contracts && npm
# ci`, which .ci/run does) and are skipped, with a message, without it.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail=0
if [ -d contracts/node_modules/solc ] && [ -d contracts/node_modules/@openzeppelin/contracts ]; then
  if ! command -v node >/dev/null; then
    echo "contracts-check: contracts/node_modules exists but node is not installed: install Node.js 20 to rebuild the artifacts" >&2
    exit 1
  fi
  mkdir -p "$tmp/artifacts"
  node contracts/build.js "$tmp/artifacts" >/dev/null
  if ! diff -r contracts/artifacts "$tmp/artifacts"; then
    echo "contracts-check: contracts/artifacts differ from a rebuild of contracts/src: run (cd contracts && node build.js) and go generate ./contracts/, then commit" >&2
    fail=1
  else
    echo "contracts-check: artifacts match a rebuild of contracts/src (solc $(node -p "require('./contracts/node_modules/solc').version()"))"
  fi
else
  echo "contracts-check: SKIPPED the artifacts rebuild: contracts/node_modules is missing (run: cd contracts && npm ci)"
fi

$GO run ./contracts/cmd/genbind -artifacts contracts/artifacts -out "$tmp/bindings.go" >/dev/null
if ! diff -u contracts/bindings.go "$tmp/bindings.go" | head -40; then :; fi
if ! cmp -s contracts/bindings.go "$tmp/bindings.go"; then
  echo "contracts-check: contracts/bindings.go differs from what cmd/genbind makes of contracts/artifacts: run go generate ./contracts/ and commit" >&2
  fail=1
else
  echo "contracts-check: bindings match contracts/artifacts"
fi
exit $fail

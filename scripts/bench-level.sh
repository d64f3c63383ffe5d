#!/usr/bin/env bash
# Tokens/s of llama.cpp built for the shipped x86-64 level against the same
# code built with -march=native, in one run: both test binaries are built
# first, then their BenchmarkGenerate/t1 and BenchmarkVerify/t1 alternate
# (count runs each), so that machine load hits both alike.
#   scripts/bench-level.sh [LEVEL] [COUNT]
set -euo pipefail
cd "$(dirname "$0")/.."
level=${1:-x86-64-v3}
count=${2:-3}
out=${TMPDIR:-/tmp}/ogpu-bench-level
mkdir -p "$out"
build() { # name march
  CGO_CFLAGS="-O3 -march=$2" CGO_CXXFLAGS="-O3 -march=$2" go test -c -o "$out/$1.test" ./runtime/llm 2>"$out/$1.build.log" \
    || { cat "$out/$1.build.log" >&2; exit 1; }
}
build shipped "$level"
build native native
models=$(cd ../shared/models 2>/dev/null && pwd || true)
for i in $(seq "$count"); do
  for b in shipped native; do
    OGPU_MODELS=${OGPU_MODELS:-$models} "$out/$b.test" -test.run '^$' -test.bench '^Benchmark(Generate|Verify)/t1$' -test.count 1 \
      | sed -n "s/^Benchmark/$b Benchmark/p"
  done
done

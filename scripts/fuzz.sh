#!/bin/sh
# Runs every cargo-fuzz target of fuzz/ for a bounded time each (default 60 s):
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
# Not part of CI. Installs cargo-fuzz if missing. Works on stable Rust: cargo-fuzz passes
# nightly-only flags (-Zsanitizer=address, ...), which RUSTC_BOOTSTRAP=1 lets a stable
# compiler take. VERSO_FUZZ_SANITIZER=none builds without AddressSanitizer (faster
# runs, fewer bugs caught). A crash leaves its input in fuzz/artifacts/<target>/ and
# makes this script exit non-zero after the remaining targets have run; reproduce one
# with: RUSTC_BOOTSTRAP=1 cargo fuzz run <target> fuzz/artifacts/<target>/<file>
set -eu
cd "$(dirname "$0")/.."
secs="${1:-60}"
[ $# -gt 0 ] && shift
targets="$*"
sanitizer="${VERSO_FUZZ_SANITIZER:-address}"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi
export RUSTC_BOOTSTRAP=1
echo "== building the fuzz targets (sanitizer: $sanitizer)"
if [ -n "$targets" ]; then
    for t in $targets; do cargo fuzz build --sanitizer "$sanitizer" "$t"; done
else
    cargo fuzz build --sanitizer "$sanitizer"
    targets="$(cargo fuzz list)"
fi

failed=""
for t in $targets; do
    mkdir -p "fuzz/corpus/$t"
    echo "== $t for ${secs}s"
    # -rss_limit_mb: a target that balloons is a finding too (the decoders have limits).
    if ! cargo fuzz run --sanitizer "$sanitizer" "$t" "fuzz/corpus/$t" -- \
        -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1; then
        failed="$failed $t"
    fi
done
if [ -n "$failed" ]; then
    echo "== FAILED:$failed (inputs in fuzz/artifacts/)"
    exit 1
fi
echo "== every target ran ${secs}s without a crash"

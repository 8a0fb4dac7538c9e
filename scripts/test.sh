#!/usr/bin/env bash
# The one test command: installs and starts what the tests need (scripts/services.sh),
# then runs every test.
#
#   scripts/test.sh                 # the whole suite (what .ci/run runs)
#   scripts/test.sh -p verso        # extra arguments go to `cargo test`
#
# A second run starts testing at once: every set-up step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/services.sh
source scripts/services.sh

say "cargo test --workspace $*"
cargo test --workspace "$@"

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

# accel's conductor and API once more on accel's own former schema history (migrations
# 1-13) instead of Cyborg 17's schema with accel's additions, which an empty database
# gets: databases made before release N became Cyborg 17 hold that history, and every
# query runs on both until it goes (docs/cyborg-compatibility.md, "accel's schema on
# Cyborg 17's"). Only with the whole suite: extra arguments name a part of it.
if [ "$#" -eq 0 ]; then
    say "ACCEL_TEST_SCHEMA=accel cargo test -p accel-conductor -p accel-api"
    ACCEL_TEST_SCHEMA=accel cargo test -p accel-conductor -p accel-api
fi

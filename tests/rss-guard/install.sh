#!/usr/bin/env bash
# The memory guard's optimised pi-run (tests/integration/rss_guard.rs): the
# `rss-guard` profile (release without LTO, laid out by bins/link-order.txt),
# built before the tests so the suite's parallel tests never share the two
# cores with this build. The target dir is outside the repository
# (PI_RSS_GUARD_TARGET, default ~/.cache/pi-toolkit-rss-guard), so the
# dependencies are built once per machine and later runs relink what changed.
# The build sees only the variables the test's own `cargo build` passes on
# (rss_guard.rs, BUILD_ENV), so that one finds nothing left to do.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TARGET="${PI_RSS_GUARD_TARGET:-$HOME/.cache/pi-toolkit-rss-guard}"
echo "tests/rss-guard/install.sh: building pi-run (profile rss-guard) into $TARGET" >&2
keep=(PATH HOME CARGO_HOME RUSTUP_HOME RUSTUP_TOOLCHAIN TMPDIR PI_LINK_ORDER)
vars=()
for name in "${keep[@]}"; do
	[ -z "${!name+x}" ] || vars+=("$name=${!name}")
done
cd "$REPO"
env -i "${vars[@]}" CARGO_TARGET_DIR="$TARGET" cargo build --quiet --profile rss-guard --bin pi-run

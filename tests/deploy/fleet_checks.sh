#!/usr/bin/env bash
# The fleet integrations (docs/fleet.md), checked offline as they will be
# used, each with broken copies that must be rejected:
#   - cloudformation/spotguard-batch.yaml: its retry strategy replayed as Batch
#     evaluates it, the Spot compute environment, IMDS options, the MIME user
#     data (its script through ShellCheck) and the job role
#     (cfn/batch_contract.js; deploy_checks.sh checks it against the
#     CloudFormation specification);
#   - examples/kubernetes/sweep-job.yaml against the Kubernetes API schema
#     (k8s/validate.js: types, enums, unknown fields) and its podFailurePolicy
#     replayed (k8s/sweep_contract.js);
#   - examples/docker/Dockerfile: spotguard as the exec-form entrypoint and its
#     RUN steps through ShellCheck (dockerfile_check.py).
#   fleet_checks.sh SOURCE_DIR
set -euo pipefail
src=$1
here=$src/tests/deploy
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "fleet_checks: FAIL: $*" >&2; exit 1; }

# must_reject NAME EXPECTED_TEXT COMMAND...: the command fails and says so.
must_reject() {
  local what=$1 expected=$2
  shift 2
  if "$@" > "$work/reject.log" 2>&1; then
    fail "$what went unnoticed"
  fi
  grep -qF -- "$expected" "$work/reject.log" || fail "$what: no \"$expected\" in: $(cat "$work/reject.log")"
}
# mutate FILE SED_EXPR OUT: a copy with one edit, which must have applied.
mutate() {
  sed "$2" "$1" > "$3"
  cmp -s "$1" "$3" && fail "the edit $2 did not apply to $1"
  return 0
}
npm_ci() {
  if [ ! -d "$1/node_modules/$2" ]; then
    npm ci --prefix "$1" --no-audit --no-fund > "$work/npm.log" 2>&1 || { cat "$work/npm.log"; fail "npm ci in $1"; }
  fi
}

echo "== AWS Batch: cloudformation/spotguard-batch.yaml"
cfn=$here/cfn
npm_ci "$cfn" yaml
batch=$src/cloudformation/spotguard-batch.yaml
node "$cfn/batch_contract.js" "$batch" "$work/user-data.sh" || fail "the Batch template breaks its contract"
(cd "$work" && shellcheck -s bash user-data.sh) || fail "shellcheck on the launch template's user data"
mutate "$batch" 's/OnExitCode: "74"/OnExitCode: "740"/' "$work/b1.yaml"
must_reject "a retry strategy that ends the job on 74" "exit 74 (interrupted, newest not committed) is EXIT, not RETRY" \
  node "$cfn/batch_contract.js" "$work/b1.yaml" "$work/ud.sh"
mutate "$batch" 's/OnReason: "\*"/OnReason: "AGENT"/' "$work/b2.yaml"
must_reject "a retry strategy without the final EXIT" "exit 1 (failed) is RETRY, not EXIT" \
  node "$cfn/batch_contract.js" "$work/b2.yaml" "$work/ud.sh"
mutate "$batch" 's/HttpPutResponseHopLimit: 2 /HttpPutResponseHopLimit: 1 /' "$work/b3.yaml"
must_reject "a hop limit of 1" "HttpPutResponseHopLimit is 1" node "$cfn/batch_contract.js" "$work/b3.yaml" "$work/ud.sh"
mutate "$batch" 's/ECS_CONTAINER_STOP_TIMEOUT=120s/ECS_CONTAINER_STOP_TIMEOUT=30s/' "$work/b4.yaml"
must_reject "a stop timeout shorter than the stop" "ECS_CONTAINER_STOP_TIMEOUT 30s is under" \
  node "$cfn/batch_contract.js" "$work/b4.yaml" "$work/ud.sh"
# shellcheck disable=SC2016 # the template's own ${...}, not the shell's
mutate "$batch" 's|${B}/spotguard/${SweepName}-\*/\*|${B}/*|' "$work/b5.yaml"
must_reject "a job role on the whole bucket" "not the sweep's prefix" node "$cfn/batch_contract.js" "$work/b5.yaml" "$work/ud.sh"
mutate "$batch" 's/Action: \[ec2:DescribeSpotPriceHistory, pricing:GetProducts\]/Action: [ec2:DescribeSpotPriceHistory]/' "$work/b6.yaml"
must_reject "a job role that cannot read the on-demand price" "cannot read the instance's prices" \
  node "$cfn/batch_contract.js" "$work/b6.yaml" "$work/ud.sh"
echo "ok: the contract holds; the user data passes ShellCheck; 6 broken copies are rejected"

echo "== Kubernetes: examples/kubernetes/sweep-job.yaml"
k8s=$here/k8s
npm_ci "$k8s" kubernetes-models
job=$src/examples/kubernetes/sweep-job.yaml
node "$k8s/validate.js" "$job" || fail "the Job does not match the Kubernetes API schema"
node "$k8s/sweep_contract.js" "$job" || fail "the Job breaks its contract"
mutate "$job" 's/terminationGracePeriodSeconds:/terminationGracePeriodSecond:/' "$work/k1.yaml"
must_reject "a misspelt field" "Did you mean to write 'terminationGracePeriodSeconds'?" node "$k8s/validate.js" "$work/k1.yaml"
mutate "$job" 's/^  completions: 20$/  completions: "20"/' "$work/k2.yaml"
must_reject "a field of the wrong type" "spec/completions must be integer" node "$k8s/validate.js" "$work/k2.yaml"
mutate "$job" 's/^kind: Job$/kind: Jobs/' "$work/k3.yaml"
must_reject "an unknown kind" "unknown apiVersion/kind batch/v1/Jobs" node "$k8s/validate.js" "$work/k3.yaml"
mutate "$job" 's/values: \[75, 74\]/values: [74]/' "$work/k4.yaml"
node "$k8s/validate.js" "$work/k4.yaml" > /dev/null || fail "the copy without 75 should still match the schema"
must_reject "a policy that counts exit 75" "exit 75 is Count, not Ignore" node "$k8s/sweep_contract.js" "$work/k4.yaml"
mutate "$job" 's/containerName: trainer/containerName: train/' "$work/k5.yaml"
must_reject "a policy naming another container" "exit 75 is Count, not Ignore" node "$k8s/sweep_contract.js" "$work/k5.yaml"
echo "ok: schema and contract hold; 5 broken copies are rejected"

echo "== Docker: examples/docker/Dockerfile"
dockerfile=$src/examples/docker/Dockerfile
mkdir "$work/run"
python3 "$here/dockerfile_check.py" "$dockerfile" "$work/run" || fail "the Dockerfile breaks its contract"
(cd "$work/run" && shellcheck ./*.sh) || fail "shellcheck on the Dockerfile's RUN steps"
python3 - "$src/examples/docker/job.json" << 'EOF' || fail "examples/docker/job.json"
import json, sys
config = json.load(open(sys.argv[1]))
assert "{index}" in config["job"], "the job name does not hold {index}"
EOF
# shellcheck disable=SC2016 # a $DEB for the Dockerfile, not for this shell
mutate "$dockerfile" 's|^    rm -rf /var/lib/apt/lists/\* /tmp/spotguard.deb; \\$|    rm -rf /var/lib/apt/lists/* $DEB; \\|' "$work/Dockerfile.unquoted"
mkdir "$work/run2"
python3 "$here/dockerfile_check.py" "$work/Dockerfile.unquoted" "$work/run2" > /dev/null || fail "the unquoted copy should pass the contract"
# shellcheck disable=SC2016 # $1 of the inner shell
must_reject "an unquoted variable in a RUN step" "SC2086" sh -c 'cd "$1" && shellcheck ./*.sh' sh "$work/run2"
mutate "$dockerfile" 's|^ENTRYPOINT \[.*\]$|ENTRYPOINT spotguard run -c /etc/spotguard/job.json --|' "$work/Dockerfile.shellform"
must_reject "a shell-form ENTRYPOINT" "is in shell form" python3 "$here/dockerfile_check.py" "$work/Dockerfile.shellform" "$work/run2"
echo "ok: spotguard is the exec-form entrypoint; $(find "$work/run" -name '*.sh' | wc -l) RUN steps pass ShellCheck; 2 broken copies are rejected"
echo "fleet_checks: 3 passed, 0 failed"

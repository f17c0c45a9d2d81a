#!/usr/bin/env bash
# Boot rehearsal: scripts/user-data.sh bootstraps two "instances" (sandbox
# roots) against the IMDS simulator and the Ceph gateway, with systemctl
# replaced by running the unit's ExecStart directly. The first is a Debian 12
# machine that installs the .deb with apt-get, the second an Amazon Linux
# 2023 one (its /etc/os-release) that installs the .rpm with dnf; apt-get and
# dnf are stubs that record their arguments and unpack the package into the
# sandbox (dpkg-deb -x, rpm2cpio). Both get the packages the way a stack
# does: scripts/publish.sh uploads them to the gateway and PACKAGE_URL is the
# s3:// directory it prints. The first is interrupted by a spot notice; the
# second restores its snapshot, resumes and finishes. A third gets a .deb
# URL on Amazon Linux and must refuse it. Then a 2-node group (NODES=2, as
# the stack's NodeCount writes it): a Debian and an Amazon Linux instance,
# each with its own metadata service (own instance id), boot, meet in the
# store, train one job together and complete it.
#   boot_rehearsal.sh SOURCE_DIR PACKAGE_DIR
set -euo pipefail
src=$1 pkgdir=$2
: "${SPOTGUARD_TEST_S3_ENDPOINT:?start the gateway: eval \"\$(scripts/s3-server.sh start)\"}"
work=$(mktemp -d)
sim_pid='' sim2_pid=''
cleanup() {
  set +e
  for f in "$work"/*/run/*.pid; do
    if [ -f "$f" ]; then kill -9 "$(cat "$f")" 2> /dev/null; fi
  done
  if [ -n "$sim_pid" ]; then kill "$sim_pid" 2> /dev/null; fi
  if [ -n "$sim2_pid" ]; then kill "$sim2_pid" 2> /dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "boot_rehearsal: FAIL: $*" >&2; for l in "$work"/*/var/log/*.log; do echo "--- $l" >&2; tail -n 30 "$l" >&2; done; exit 1; }

# The packages under test (scripts/package.sh), published as a stack's are:
# `aws` reaches the gateway through a wrapper first on PATH.
[ -n "$(find "$pkgdir" -maxdepth 1 -name 'spotguard_*.deb')" ] || fail "no .deb in $pkgdir"
mkdir -p "$work/bin"
cat > "$work/bin/aws" << AWS
#!/usr/bin/env bash
exec $(command -v aws) --endpoint-url "$SPOTGUARD_TEST_S3_ENDPOINT" --region "$SPOTGUARD_TEST_S3_REGION" "\$@"
AWS
chmod +x "$work/bin/aws"
export PATH=$work/bin:$PATH
export AWS_ACCESS_KEY_ID=$SPOTGUARD_TEST_S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$SPOTGUARD_TEST_S3_SECRET_KEY
bash "$src/scripts/publish.sh" "s3://$SPOTGUARD_TEST_S3_BUCKET" "$pkgdir" > "$work/publish.out" 2> "$work/publish.log" ||
  { cat "$work/publish.log"; fail "publish.sh"; }
package_url=$(sed -n 's/^PackageUrl=//p' "$work/publish.out")
[[ $package_url == "s3://$SPOTGUARD_TEST_S3_BUCKET/spotguard-packages/"*/ ]] || fail "publish.sh printed: $(cat "$work/publish.out")"
echo "ok: published; PackageUrl=$package_url"

# The package managers, as far as user-data uses them: record the arguments,
# unpack the package into the sandbox.
cat > "$work/bin/apt-get" << 'FAKE'
#!/usr/bin/env bash
set -euo pipefail
echo "apt-get $*" >> "$SPOTGUARD_ROOT/var/log/package-manager.log"
[ "$1 $2 $3" = "install -y -q" ] && [[ $4 == *.deb ]] || { echo "fake apt-get: unexpected $*" >&2; exit 100; }
dpkg-deb -x "$4" "$SPOTGUARD_ROOT"
FAKE
cat > "$work/bin/dnf" << 'FAKE'
#!/usr/bin/env bash
set -euo pipefail
echo "dnf $*" >> "$SPOTGUARD_ROOT/var/log/package-manager.log"
[ "$1 $2 $3" = "install -y -q" ] && [[ $4 == *.rpm ]] || { echo "fake dnf: unexpected $*" >&2; exit 1; }
cd "$SPOTGUARD_ROOT" && rpm2cpio "$4" | cpio -idm --quiet
FAKE
chmod +x "$work/bin/apt-get" "$work/bin/dnf"
export APT_GET=$work/bin/apt-get DNF=$work/bin/dnf
debian_os_release='PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
ID=debian'
amazon_os_release='NAME="Amazon Linux"
VERSION="2023"
ID="amzn"
ID_LIKE="fedora"
VERSION_ID="2023"
PRETTY_NAME="Amazon Linux 2023.6.20241121"'

# The instance metadata service.
/usr/bin/python3 "$src/tests/tools/imds_sim.py" --port 0 --port-file "$work/imds.port" \
  > /dev/null 2>&1 &
sim_pid=$!
for _ in $(seq 100); do [ -s "$work/imds.port" ] && break; sleep 0.1; done
imds="http://127.0.0.1:$(cat "$work/imds.port")"
sim() { curl -fsS -X "$1" "$imds/_sim/$2" ${3:+-d "$3"} > /dev/null; }

# systemctl, as far as user-data uses it: the unit's ExecStart, run directly.
cat > "$work/systemctl" << 'FAKE'
#!/usr/bin/env bash
set -euo pipefail
root=$SPOTGUARD_ROOT
unit=${*: -1}
pidfile=$root/run/$unit.pid
case "$1" in
  is-active) [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2> /dev/null ;;
  enable)
    job=${unit#spotguard@}
    exec_start=$(sed -n 's/^ExecStart=//p' "$root/usr/lib/systemd/system/spotguard@.service")
    exec_start=${exec_start//%i/$job}
    exec_start=${exec_start//\/usr\/bin\//$root/usr/bin/}
    exec_start=${exec_start//\/etc\//$root/etc/}
    mkdir -p "$root/run"
    # shellcheck disable=SC2086  # ExecStart is split on spaces, as systemd does here
    (set +e; $exec_start > "$root/var/log/spotguard-agent.log" 2>&1; echo $? > "$root/run/$unit.exit") \
      > /dev/null 2>&1 &
    echo $! > "$pidfile"
    ;;
  *) echo "fake systemctl: $*" >&2; exit 1 ;;
esac
FAKE
chmod +x "$work/systemctl"

export SYSTEMCTL=$work/systemctl
job=rehearsal-$(date +%s%N)
store=s3://$SPOTGUARD_TEST_S3_BUCKET/rehearsals
ls_json() { "$work/i1/usr/bin/spotguard" ls --job "$job" --store "$store" --endpoint "$SPOTGUARD_TEST_S3_ENDPOINT" --json 2> /dev/null; }

bootstrap() {  # bootstrap ROOT OS_RELEASE < the job's own lines of bootstrap.env
  local root=$1
  mkdir -p "$root/etc/spotguard" "$root/var/log"
  printf '%s\n' "$2" > "$root/etc/os-release"
  {
    cat << ENV
STORE=$store
ENDPOINT=$SPOTGUARD_TEST_S3_ENDPOINT
REGION=us-east-1
CHECKPOINT_DIR=$root/data/ckpt
CHECKPOINT_SIGNAL=SIGUSR1
UPLOAD_INTERVAL=1s
SETTLE_TIME=300ms
ENV
    cat
  } > "$root/etc/spotguard/bootstrap.env"
  SPOTGUARD_ROOT=$root bash "$src/scripts/user-data.sh" || fail "user-data on $root"
}
boot() {  # boot ROOT STEPS OS_RELEASE [PACKAGE_URL]
  bootstrap "$1" "$3" << ENV
JOB=$job
PACKAGE_URL=${4:-$package_url}
PRESET=generic
IMDS_ENDPOINT=$imds
TRAINING_COMMAND='["/usr/bin/python3", "$src/examples/simple_trainer.py", "--out", "{checkpoint_dir}", "--steps", "$2", "--step-seconds", "0.02", "--checkpoint-every", "50"]'
RESUME_ARGS='["--resume", "{resume}"]'
ENV
}
wait_exit() {  # wait_exit ROOT [JOB] -> prints the agent's exit code
  local f=$1/run/spotguard@${2:-$job}.exit
  for _ in $(seq 600); do [ -f "$f" ] && { cat "$f"; return; }; sleep 0.1; done
  fail "the agent in $1 did not end"
}

echo "== instance 1 (Debian 12, .deb with apt-get): boot, train, get interrupted"
boot "$work/i1" 100000 "$debian_os_release"
grep -q "started spotguard@$job" "$work/i1/var/log/spotguard-bootstrap.log" || fail "unit not started"
grep -q "installed spotguard .* from the .deb package" "$work/i1/var/log/spotguard-bootstrap.log" || fail "no .deb install logged"
grep -qx "apt-get install -y -q $work/i1/var/cache/spotguard/spotguard.deb" "$work/i1/var/log/package-manager.log" ||
  fail "apt-get was not called as expected: $(cat "$work/i1/var/log/package-manager.log")"
for _ in $(seq 300); do [ "$(ls_json | grep -c '"seq"')" -ge 1 ] && break; sleep 0.1; done
[ "$(ls_json | grep -c '"seq"')" -ge 1 ] || fail "no periodic snapshot"
sim POST spot-notice '{"action": "terminate", "in_seconds": 100}'
code=$(wait_exit "$work/i1")
[ "$code" = 75 ] || fail "instance 1 exited $code, not 75"
step=$(ls_json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["step"])')
echo "ok: interrupted with step $step committed"

echo "== instance 2 (Amazon Linux 2023, .rpm with dnf): boot twice (a reboot), restore, resume, finish"
sim DELETE spot-notice
sim POST identity '{"instanceId": "i-0replacement000000"}'
boot "$work/i2" $((step + 20)) "$amazon_os_release"
boot "$work/i2" $((step + 20)) "$amazon_os_release"
grep -q "is already running\|agent already installed" "$work/i2/var/log/spotguard-bootstrap.log" ||
  fail "the second bootstrap did not notice the first"
grep -q "this machine: Amazon Linux 2023" "$work/i2/var/log/spotguard-bootstrap.log" || fail "the OS was not logged"
grep -q "installed spotguard .* from the .rpm package" "$work/i2/var/log/spotguard-bootstrap.log" || fail "no .rpm install logged"
[ "$(cat "$work/i2/var/log/package-manager.log")" = "dnf install -y -q $work/i2/var/cache/spotguard/spotguard.rpm" ] ||
  fail "dnf was not called once as expected: $(cat "$work/i2/var/log/package-manager.log")"
code=$(wait_exit "$work/i2")
[ "$code" = 0 ] || fail "instance 2 exited $code, not 0"
grep -q "resumed from .* at step $step" "$work/i2/var/log/spotguard-agent.log" || fail "no resume at step $step"
"$work/i2/usr/bin/spotguard" status --job "$job" --store "$store" --endpoint "$SPOTGUARD_TEST_S3_ENDPOINT" --json |
  /usr/bin/python3 -c 'import json,sys; s=json.load(sys.stdin); sys.exit(0 if s.get("complete") else 1)' ||
  fail "the job is not marked complete"
echo "ok: resumed at step $step and completed; its bootstrap log:"
sed 's/^/  /' "$work/i2/var/log/spotguard-bootstrap.log" | grep -v '^  20.*Z info '

echo "== instance 3 (Amazon Linux 2023) given a .deb URL: refuses"
if boot_out=$(boot "$work/i3" 10 "$amazon_os_release" "${package_url}spotguard.deb" 2>&1); then
  fail "user-data installed a .deb on Amazon Linux"
fi
grep -q "FAILED: PACKAGE_URL is a .deb but this machine installs .rpm packages" "$work/i3/var/log/spotguard-bootstrap.log" ||
  fail "no reason logged: $boot_out"
[ ! -e "$work/i3/var/log/package-manager.log" ] || fail "a package manager ran"
echo "ok: refused, with the reason logged"

echo "== a 2-node group (NODES=2): a Debian and an Amazon Linux instance train one job"
/usr/bin/python3 "$src/tests/tools/imds_sim.py" --port 0 --port-file "$work/imds2.port" \
  > /dev/null 2>&1 &
sim2_pid=$!
for _ in $(seq 100); do [ -s "$work/imds2.port" ] && break; sleep 0.1; done
imds2="http://127.0.0.1:$(cat "$work/imds2.port")"
sim POST identity '{"instanceId": "i-0group00000000001"}'
curl -fsS -X POST "$imds2/_sim/identity" -d '{"instanceId": "i-0group00000000002"}' > /dev/null
group_job=rehearsal-group-$(date +%s%N)
boot_node() {  # boot_node ROOT METADATA_ENDPOINT OS_RELEASE
  bootstrap "$1" "$3" << ENV
JOB=$group_job
PACKAGE_URL=$package_url
PRESET=pytorch
IMDS_ENDPOINT=$2
NODES=2
GROUP_PORT=29650
TRAINING_COMMAND='["/usr/bin/python3", "$src/tests/tools/group_trainer.py", "--steps", "30", "--step-seconds", "0.05"]'
ENV
}
boot_node "$work/g1" "$imds" "$debian_os_release"
boot_node "$work/g2" "$imds2" "$amazon_os_release"
for g in g1 g2; do
  grep -q '"nodes": 2' "$work/$g/etc/spotguard/$group_job.json" || fail "$g's config has no \"nodes\": 2"
  grep -q '"port": 29650' "$work/$g/etc/spotguard/$group_job.json" || fail "$g's config has no group port"
done
for g in g1 g2; do
  code=$(wait_exit "$work/$g" "$group_job")
  [ "$code" = 0 ] || fail "$g exited $code, not 0"
done
# One trainer ran as rank 0 and the other as rank 1, both to step 30.
ranks=$(cat "$work/g1/data/ckpt/final.txt" "$work/g2/data/ckpt/final.txt" | cut -d' ' -f1,2 | sort | tr '\n' ' ')
[ "$ranks" = "0 30 1 30 " ] || fail "the nodes' final lines are '$ranks', not ranks 0 and 1 at step 30"
grep -q "round 1: rank" "$work/g1/var/log/spotguard-agent.log" || fail "g1 took no part in round 1"
"$work/g1/usr/bin/spotguard" ls -c "$work/g1/etc/spotguard/$group_job.json" --json > "$work/group-ls.json" 2> "$work/group-ls.log" || fail "ls of the group: $(cat "$work/group-ls.log")"
/usr/bin/python3 -c 'import json,sys; rows=json.load(open(sys.argv[1])); sys.exit(0 if rows and all(r["nodes"] == 2 and len(r["parts"]) == 2 for r in rows) else 1)' \
  "$work/group-ls.json" || fail "ls shows no 2-node group snapshot: $(cat "$work/group-ls.json")"
"$work/g2/usr/bin/spotguard" status -c "$work/g2/etc/spotguard/$group_job.json" --json |
  /usr/bin/python3 -c 'import json,sys; g=json.load(sys.stdin)["group"]; sys.exit(0 if g["complete"] and g["nodes"] == 2 else 1)' ||
  fail "the group's job is not marked complete"
echo "ok: both nodes booted, formed round 1, trained and completed the job"
echo "boot_rehearsal: 4 passed, 0 failed"

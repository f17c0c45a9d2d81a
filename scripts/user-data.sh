#!/usr/bin/env bash
# spotguard bootstrap for EC2 user data: installs the agent, writes the job's
# config, starts the systemd unit. Idempotent: a rerun (a reboot runs user
# data again on some AMIs, or a person runs it by hand) finds what is done and
# does only the rest. Every step is logged to /var/log/spotguard-bootstrap.log.
#
# The job comes from /etc/spotguard/bootstrap.env (the CloudFormation stack
# writes it) or the environment:
#   JOB, STORE, CHECKPOINT_DIR, TRAINING_COMMAND (JSON array), PACKAGE_URL
#   optional: REGION, ENDPOINT, PRESET, RESUME_ARGS (JSON array),
#   CHECKPOINT_SIGNAL, UPLOAD_INTERVAL, ON_COMPLETE, LIFECYCLE_HOOK,
#   IMDS_ENDPOINT, SETTLE_TIME
# For rehearsals (tests/deploy/boot_rehearsal.sh) SPOTGUARD_ROOT puts every
# path below a sandbox directory and SYSTEMCTL replaces systemctl.
set -euo pipefail

root=${SPOTGUARD_ROOT:-}
log=$root/var/log/spotguard-bootstrap.log
mkdir -p "$(dirname "$log")"
exec >> "$log" 2>&1
step() { echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $*"; }
die() { step "FAILED: $*"; exit 1; }

env_file=$root/etc/spotguard/bootstrap.env
if [ -f "$env_file" ]; then
  # shellcheck source=/dev/null
  . "$env_file"
fi
: "${JOB:?JOB is not set}" "${STORE:?STORE is not set}" "${CHECKPOINT_DIR:?CHECKPOINT_DIR is not set}"
: "${TRAINING_COMMAND:?TRAINING_COMMAND is not set}" "${PACKAGE_URL:?PACKAGE_URL is not set}"
step "bootstrap of job $JOB"

bin=$root/usr/bin/spotguard
install_agent() {
  if [ -x "$bin" ] && "$bin" --version > /dev/null 2>&1; then
    step "agent already installed: $("$bin" --version)"
    return
  fi
  local pkg=$root/var/cache/spotguard/spotguard.deb
  mkdir -p "$(dirname "$pkg")"
  case "$PACKAGE_URL" in
    s3://*) aws s3 cp --only-show-errors "$PACKAGE_URL" "$pkg" ;;
    file://*) cp "${PACKAGE_URL#file://}" "$pkg" ;;
    *) curl -fsSL --retry 5 -o "$pkg" "$PACKAGE_URL" ;;
  esac
  if [ -n "$root" ]; then
    dpkg-deb -x "$pkg" "$root"  # a rehearsal: unpack into the sandbox
  else
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg"
  fi
  "$bin" --version > /dev/null || die "the installed agent does not run"
  step "installed $("$bin" --version)"
}

# A JSON string from shell text (quotes and backslashes escaped).
json_string() {
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  printf '"%s"' "$s"
}

write_config() {
  local config=$root/etc/spotguard/$JOB.json tmp
  mkdir -p "$(dirname "$config")" "$CHECKPOINT_DIR"
  tmp=$(mktemp "$config.XXXXXX")
  {
    printf '{\n'
    printf '  "job": %s,\n' "$(json_string "$JOB")"
    printf '  "store": %s,\n' "$(json_string "$STORE")"
    printf '  "checkpoint_dir": %s,\n' "$(json_string "$CHECKPOINT_DIR")"
    printf '  "command": %s,\n' "$TRAINING_COMMAND"
    printf '  "resume_args": %s,\n' "${RESUME_ARGS:-[]}"
    printf '  "preset": %s,\n' "$(json_string "${PRESET:-pytorch}")"
    printf '  "checkpoint_signal": %s,\n' "$(json_string "${CHECKPOINT_SIGNAL:-none}")"
    printf '  "upload_interval": %s,\n' "$(json_string "${UPLOAD_INTERVAL:-5m}")"
    printf '  "on_complete": %s' "$(json_string "${ON_COMPLETE:-mark}")"
    [ -n "${REGION:-}" ] && printf ',\n  "region": %s' "$(json_string "$REGION")"
    [ -n "${ENDPOINT:-}" ] && printf ',\n  "endpoint": %s' "$(json_string "$ENDPOINT")"
    [ -n "${LIFECYCLE_HOOK:-}" ] && printf ',\n  "lifecycle_hook": %s' "$(json_string "$LIFECYCLE_HOOK")"
    [ -n "${SETTLE_TIME:-}" ] && printf ',\n  "settle_time": %s' "$(json_string "$SETTLE_TIME")"
    [ -n "${IMDS_ENDPOINT:-}" ] && printf ',\n  "imds": {"endpoint": %s}' "$(json_string "$IMDS_ENDPOINT")"
    printf '\n}\n'
  } > "$tmp"
  # Refuse a bad config before anything starts; the error names the keys.
  if ! "$bin" run -c "$tmp" --print-config > /dev/null; then
    rm -f "$tmp"
    die "the job config is invalid (see above)"
  fi
  mv "$tmp" "$config"
  step "wrote $config"
}

start_unit() {
  local systemctl=${SYSTEMCTL:-systemctl}
  # `is-active` exits non-zero for a stopped unit: that is an answer, not an error.
  if $systemctl is-active --quiet "spotguard@$JOB"; then
    step "spotguard@$JOB is already running"
    return
  fi
  $systemctl enable --now "spotguard@$JOB" || die "could not start spotguard@$JOB"
  step "started spotguard@$JOB"
}

install_agent
write_config
start_unit
step "bootstrap done"

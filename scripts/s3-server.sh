#!/usr/bin/env bash
# Runs a throwaway single-node Ceph RADOS Gateway (real S3) on 127.0.0.1 for
# spotguard's integration tests.
#
#   scripts/s3-server.sh start    build a cluster from scratch (or reuse a running
#                                 one) and print the SPOTGUARD_TEST_S3_* exports
#   scripts/s3-server.sh env      print the exports only
#   scripts/s3-server.sh status   exit 0 if the gateway answers HTTP, 1 otherwise
#   scripts/s3-server.sh stop     kill every daemon, wait for it, delete all state
#
# Typical use:  eval "$(scripts/s3-server.sh start)"
#
# One monitor (msgr v1 only, no auth), one memstore OSD, pools of size 1, no mgr,
# one radosgw (beast). All state - config, mon and osd data, logs, pid files,
# admin sockets - lives in ${SPOTGUARD_S3_DIR:-/tmp/spotguard-s3}; nothing is
# written to /etc/ceph or /var/lib/ceph. Daemons run as the calling user.
# stdout carries only `export` lines; progress and errors go to stderr.
set -euo pipefail

DIR="${SPOTGUARD_S3_DIR:-/tmp/spotguard-s3}"
MON_PORT="${SPOTGUARD_S3_MON_PORT:-16789}"
RGW_PORT="${SPOTGUARD_S3_PORT:-17480}"
READY_TIMEOUT="${SPOTGUARD_S3_READY_TIMEOUT:-90}"

ACCESS_KEY="SPOTGUARDTESTACCESS"
SECRET_KEY="spotguard-test-secret-key-0123456789"
BUCKET="spotguard-test"
# RGW checks SigV4 against whatever region the client signs with; with us-east-1
# botocore sends CreateBucket without a LocationConstraint, which the default
# zonegroup accepts.
REGION="us-east-1"
ENDPOINT="http://127.0.0.1:${RGW_PORT}"

CONF="$DIR/ceph.conf"
MARKER="$DIR/.spotguard-s3"
RGW_NAME="client.rgw.spotguard"
# Order matters for stop: gateway first, monitor last.
DAEMONS=("$RGW_NAME" osd.0 mon.a)

log() { echo "s3-server: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

usage() {
  echo "usage: $0 start|stop|env|status" >&2
  exit 2
}

print_env() {
  cat <<EOF
export SPOTGUARD_TEST_S3_ENDPOINT=${ENDPOINT}
export SPOTGUARD_TEST_S3_ACCESS_KEY=${ACCESS_KEY}
export SPOTGUARD_TEST_S3_SECRET_KEY=${SECRET_KEY}
export SPOTGUARD_TEST_S3_BUCKET=${BUCKET}
export SPOTGUARD_TEST_S3_REGION=${REGION}
EOF
}

# HTTP status code of GET / on the gateway port, 000 when nothing answers.
http_code() {
  curl -s -o /dev/null -m 3 -w '%{http_code}' "$ENDPOINT/" 2>/dev/null || true
}

gateway_answers() {
  local code
  code="$(http_code)"
  [ -n "$code" ] && [ "$code" != "000" ]
}

# True while the process exists and is not a zombie (daemons are reparented to
# pid 1, which may take a while to reap them).
pid_alive() {
  local pid="$1" stat
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  [ "${stat%% *}" != "Z" ]
}

# Pid of a running daemon of this state dir, from its pid file.
daemon_pid() {
  local f="$DIR/run/$1.pid" pid
  [ -f "$f" ] || return 1
  pid="$(tr -dc '0-9' <"$f")"
  pid_alive "$pid" || return 1
  echo "$pid"
}

# Live processes whose command line names this exact config file: a daemon
# that lost its pid file, or a hung ceph CLI.
conf_pids() {
  local pid re
  re="$(printf '%s' "$CONF" | sed 's/[][\\.^$*+?(){}|]/\\&/g')"
  for pid in $(pgrep -f -- "-c $re( |\$)" 2>/dev/null || true); do
    pid_alive "$pid" && echo "$pid"
  done
}

tail_log() {
  local f="$1"
  if [ -f "$f" ]; then
    # Ceph marks errors with level -1; rocksdb stats would bury them in a tail.
    log "---- error lines (level -1) of $f ----"
    grep -E '^[0-9T:.+-]+ [0-9a-f]+ -1 ' "$f" | tail -n 15 >&2 || true
    log "---- last lines of $f ----"
    tail -n 25 "$f" >&2 || true
    log "---- end of $f ----"
  else
    log "(no log file $f)"
  fi
}

ceph_cli() {
  timeout 30 ceph -c "$CONF" --connect-timeout 10 "$@"
}

# SIGTERM the given pids, wait up to $1 s for them to exit, then SIGKILL.
terminate() {
  local secs="$1" pid deadline killed=""
  shift
  local alive=("$@")
  kill -TERM "${alive[@]}" 2>/dev/null || true
  deadline=$((SECONDS + secs))
  while [ "${#alive[@]}" -gt 0 ]; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      if [ -n "$killed" ]; then
        log "ERROR: ${alive[*]} survived SIGKILL"
        return 1
      fi
      log "still alive after $secs s, sending SIGKILL to ${alive[*]}"
      kill -KILL "${alive[@]}" 2>/dev/null || true
      killed=1
      deadline=$((SECONDS + 10))
    fi
    sleep 0.1
    local still=()
    for pid in "${alive[@]}"; do
      if pid_alive "$pid"; then still+=("$pid"); fi
    done
    alive=("${still[@]+"${still[@]}"}")
  done
}

# Stops the daemons one at a time, gateway first and monitor last: each one
# talks to those after it while it shuts down (the OSD waits up to 5 s for the
# monitor to ack its mark-down), so stopping all at once is slower and can hang.
stop_all() {
  local name pid
  for name in "${DAEMONS[@]}"; do
    pid="$(daemon_pid "$name")" || continue
    log "stopping $name (pid $pid)"
    terminate 15 "$pid"
  done
  local rest
  rest="$(conf_pids | tr '\n' ' ')"
  if [ -n "${rest// /}" ]; then
    log "stopping leftover processes $rest"
    # shellcheck disable=SC2086
    terminate 10 $rest
  fi
}

remove_state() {
  [ -e "$DIR" ] || return 0
  case "$DIR" in
    "" | / | /tmp | /tmp/ | "$HOME" | "$HOME/") die "refusing to delete state dir '$DIR'" ;;
  esac
  if [ -f "$MARKER" ] || [ -z "$(ls -A "$DIR" 2>/dev/null)" ]; then
    rm -rf "$DIR"
  else
    die "$DIR exists but was not made by this script (no $MARKER); not deleting it"
  fi
}

write_conf() {
  local fsid="$1"
  cat >"$CONF" <<EOF
# Generated by scripts/s3-server.sh: throwaway single-node cluster for tests.
[global]
fsid = $fsid
mon initial members = a
mon host = v1:127.0.0.1:$MON_PORT
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr2 = false
ms bind ipv6 = false

auth cluster required = none
auth service required = none
auth client required = none
keyring = $DIR/keyring

run dir = $DIR/run
crash dir = $DIR/crash
log file = $DIR/log/\$name.log
pid file = $DIR/run/\$name.pid
admin socket = $DIR/run/\$name.asok
mon cluster log file = $DIR/log/cluster.log
log to stderr = false
err to stderr = true

osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon max pg per osd = 1000
mon warn on pool no redundancy = false
mon warn on insecure global id reclaim allowed = false
mon data avail warn = 1
mon data avail crit = 0
# Every mon command (pool create, osd boot, ...) otherwise waits ~1 s for a
# paxos round; rgw issues a dozen of them while it starts.
paxos propose interval = 0.05
paxos min wait = 0.01

[mon]
mon data = $DIR/mon/\$name

[osd]
osd data = $DIR/osd/\$name
osd objectstore = memstore
memstore device bytes = 8589934592
osd crush update on start = false
# At init the OSD would send "osd crush set-device-class"; that command can
# race the mon session (sent with a zero fsid -> 'wrong fsid', OSD exits).
osd class update on start = false

[$RGW_NAME]
rgw data = $DIR/rgw
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT
rgw enable usage log = false
rgw enable ops log = false
rgw thread pool size = 64
# Deleted/overwritten objects' tail data (everything past the first 4 MiB, all
# of a multipart object) is only freed by the garbage collector, by default
# after 2 h. memstore keeps it in RAM, so free it within seconds instead.
rgw gc obj min wait = 10
rgw gc processor period = 10
# Bucket lifecycle workers are not needed, and on SIGTERM radosgw waits for
# them to finish a 5 s back-off sleep.
rgw enable lc threads = false
EOF
}

# Waits until "$@" succeeds or $2 seconds pass; $1 names what we wait for.
wait_for() {
  local what="$1" secs="$2"
  shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      return 1
    fi
    sleep 0.3
  done
  log "$what ready after $((SECONDS - START_SECONDS)) s"
}

crush_add_osd() {
  ceph_cli osd crush add osd.0 1.0 host=localhost root=default >>"$DIR/log/setup.log" 2>&1
}

osd_up() {
  ceph_cli osd stat -f json 2>/dev/null | grep -Eq '"num_up_osds": *1\b'
}

bucket_exists_or_created() {
  local code
  # curl 7.88 signs s3 requests without x-amz-content-sha256, which RGW
  # requires (SignatureDoesNotMatch otherwise); passing it makes curl sign it.
  code="$(curl -s -o /dev/null -m 10 -w '%{http_code}' -X PUT \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
    --aws-sigv4 "aws:amz:${REGION}:s3" --user "${ACCESS_KEY}:${SECRET_KEY}" \
    "$ENDPOINT/$BUCKET" 2>/dev/null || true)"
  # 200: created; 409: BucketAlreadyExists / BucketAlreadyOwnedByYou.
  [ "$code" = "200" ] || [ "$code" = "409" ]
}

start() {
  START_SECONDS=$SECONDS
  if [ -f "$DIR/ready" ] && gateway_answers; then
    log "already running at $ENDPOINT (state in $DIR)"
    print_env
    return 0
  fi
  if [ -n "$(conf_pids)" ]; then
    log "found daemons of an unfinished or deleted cluster in $DIR; stopping them"
    stop_all
  fi
  if gateway_answers; then
    die "something else already answers on $ENDPOINT; set SPOTGUARD_S3_PORT or stop it"
  fi
  if [ -e "$DIR" ]; then
    log "found stale state in $DIR; rebuilding from scratch"
    stop_all
    remove_state
  fi

  for tool in ceph ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph-authtool curl; do
    command -v "$tool" >/dev/null || die "$tool not found; run scripts/install-deps.sh"
  done

  mkdir -p "$DIR"/{run,log,crash,mon,osd/osd.0,rgw}
  : >"$MARKER"
  local fsid osd_uuid
  fsid="$(cat /proc/sys/kernel/random/uuid)"
  osd_uuid="$(cat /proc/sys/kernel/random/uuid)"
  write_conf "$fsid"

  log "creating monitor (v1:127.0.0.1:$MON_PORT)"
  ceph-authtool --create-keyring "$DIR/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  ceph-authtool "$DIR/keyring" --gen-key -n client.admin \
    --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
  monmaptool --create --fsid "$fsid" --addv a "[v1:127.0.0.1:$MON_PORT]" \
    "$DIR/monmap" >/dev/null
  ceph-mon -c "$CONF" -i a --mkfs --monmap "$DIR/monmap" --keyring "$DIR/keyring" \
    >>"$DIR/log/setup.log" 2>&1 || { tail_log "$DIR/log/setup.log"; tail_log "$DIR/log/mon.a.log"; die "ceph-mon --mkfs failed"; }
  ceph-mon -c "$CONF" -i a >>"$DIR/log/setup.log" 2>&1 ||
    { tail_log "$DIR/log/mon.a.log"; die "ceph-mon failed to start"; }
  wait_for "monitor" 30 ceph_cli mon stat ||
    { tail_log "$DIR/log/mon.a.log"; die "monitor did not answer within 30 s"; }

  log "creating OSD (memstore)"
  local osd_id
  local try deadline=$((SECONDS + 30))
  until osd_id="$(ceph_cli osd create "$osd_uuid" 2>>"$DIR/log/setup.log")"; do
    [ "$SECONDS" -lt "$deadline" ] || { tail_log "$DIR/log/setup.log"; die "ceph osd create failed for 30 s"; }
    sleep 0.3
  done
  [ "$osd_id" = "0" ] || die "expected osd id 0, got '$osd_id'"
  ceph-osd -c "$CONF" -i 0 --mkfs --osd-uuid "$osd_uuid" >>"$DIR/log/setup.log" 2>&1 ||
    { tail_log "$DIR/log/setup.log"; tail_log "$DIR/log/osd.0.log"; die "ceph-osd --mkfs failed"; }
  # The monitor can answer `mon stat` and still refuse this command for a
  # moment ("EPERM: problem getting command descriptions from mon", seen on a
  # loaded machine), so it is retried like the waits above.
  wait_for "CRUSH map" 30 crush_add_osd ||
    { tail_log "$DIR/log/setup.log"; die "ceph osd crush add failed for 30 s"; }
  for try in 1 2 3; do
    ceph-osd -c "$CONF" -i 0 >>"$DIR/log/setup.log" 2>&1 && break
    [ "$try" -lt 3 ] || { tail_log "$DIR/log/osd.0.log"; die "ceph-osd failed to start"; }
    log "ceph-osd failed to start (attempt $try); retrying"
    sleep 1
  done
  wait_for "OSD" 60 osd_up ||
    { tail_log "$DIR/log/osd.0.log"; tail_log "$DIR/log/mon.a.log"; die "osd.0 not up within 60 s"; }

  log "starting radosgw on $ENDPOINT"
  radosgw -c "$CONF" -n "$RGW_NAME" >>"$DIR/log/setup.log" 2>&1 ||
    { tail_log "$DIR/log/$RGW_NAME.log"; die "radosgw failed to start"; }
  if ! wait_for "radosgw" "$READY_TIMEOUT" gateway_answers; then
    tail_log "$DIR/log/setup.log"
    tail_log "$DIR/log/$RGW_NAME.log"
    tail_log "$DIR/log/osd.0.log"
    die "radosgw did not answer HTTP on $ENDPOINT within $READY_TIMEOUT s (state left in $DIR; run '$0 stop' to clean up)"
  fi

  log "creating S3 user and bucket $BUCKET"
  radosgw-admin -c "$CONF" user create --uid=spotguard-test --display-name="spotguard tests" \
    --access-key="$ACCESS_KEY" --secret="$SECRET_KEY" >>"$DIR/log/setup.log" 2>&1 ||
    { tail_log "$DIR/log/setup.log"; die "radosgw-admin user create failed"; }
  wait_for "bucket" 30 bucket_exists_or_created ||
    { tail_log "$DIR/log/$RGW_NAME.log"; die "could not create bucket $BUCKET"; }

  : >"$DIR/ready"
  log "up in $((SECONDS - START_SECONDS)) s; state in $DIR"
  print_env
}

stop() {
  stop_all
  if [ ! -e "$DIR" ]; then
    log "not running (no $DIR)"
    return 0
  fi
  remove_state
  log "stopped; removed $DIR"
}

status() {
  if gateway_answers; then
    log "gateway answers at $ENDPOINT"
    return 0
  fi
  log "gateway not answering at $ENDPOINT"
  return 1
}

[ $# -eq 1 ] || usage
case "$1" in
  start) start ;;
  stop) stop ;;
  env) print_env ;;
  status) status ;;
  *) usage ;;
esac

#!/usr/bin/env bash
# A stand-in for systemctl in the sandbox of getting_started_test.py (systemd
# cannot run in the test machine): it does with spotguard@.service what
# systemd does, as far as the page's commands need it. $SANDBOX is the root.
#   daemon-reload                      nothing to do
#   enable --now spotguard@JOB         the enable symlink; ExecStart with %i=JOB,
#                                      in the background, with LOGS_DIRECTORY and
#                                      STATE_DIRECTORY as the unit's LogsDirectory=
#                                      and StateDirectory= give them
#   stop spotguard@JOB                 SIGTERM to the main process (KillMode=mixed),
#                                      waits for its exit (TimeoutStopSec=5min);
#                                      fails unless the unit counts the exit as
#                                      success: 0 or SuccessExitStatus=
#   kill-all                           (the test's cleanup) SIGKILL to every unit
set -euo pipefail
: "${SANDBOX:?}"
units=$SANDBOX/etc/systemd/system
run=$SANDBOX/run/stand-in-systemd
mkdir -p "$run"

unit_value() {  # unit_value KEY: the value of KEY= in the template
  sed -n "s/^$1=//p" "$units/spotguard@.service" | tail -n 1
}

case "${1:-}" in
  daemon-reload) ;;
  enable)
    [ "${2:-}" = --now ] || { echo "stand-in systemctl: only enable --now" >&2; exit 2; }
    name=$3 instance=${3#spotguard@}
    [ -f "$units/spotguard@.service" ] || { echo "Failed to enable unit: Unit file $name.service does not exist." >&2; exit 1; }
    mkdir -p "$units/multi-user.target.wants"
    ln -sf "$units/spotguard@.service" "$units/multi-user.target.wants/$name.service"
    echo "Created symlink /etc/systemd/system/multi-user.target.wants/$name.service → /etc/systemd/system/spotguard@.service." >&2
    exec_start=$(unit_value ExecStart)
    exec_start=${exec_start//%i/$instance}
    exec_start=${exec_start//\/usr\/bin\//$SANDBOX/usr/bin/}
    exec_start=${exec_start//\/etc\//$SANDBOX/etc/}
    read -r -a argv <<< "$exec_start"
    mkdir -p "$SANDBOX/var/log/spotguard" "$SANDBOX/var/lib/spotguard"
    (
      cd /
      LOGS_DIRECTORY=$SANDBOX/var/log/spotguard STATE_DIRECTORY=$SANDBOX/var/lib/spotguard \
        setsid "${argv[@]}" > "$run/$instance.journal" 2>&1 < /dev/null &
      echo $! > "$run/$instance.pid"
      wait $! && rc=0 || rc=$?
      echo "$rc" > "$run/$instance.rc"
    ) > /dev/null 2>&1 &
    for _ in $(seq 100); do [ -s "$run/$instance.pid" ] && break; sleep 0.1; done
    ;;
  stop)
    instance=${2#spotguard@}
    pid=$(cat "$run/$instance.pid")
    kill -TERM "$pid"
    for _ in $(seq 3000); do [ -s "$run/$instance.rc" ] && break; sleep 0.1; done
    rc=$(cat "$run/$instance.rc" 2> /dev/null || echo timeout)
    rm -f "$run/$instance.pid"
    for ok in 0 $(unit_value SuccessExitStatus); do
      [ "$rc" = "$ok" ] && exit 0
    done
    echo "stand-in systemctl: $2 ended with $rc, a failure for systemd; its output:" >&2
    cat "$run/$instance.journal" >&2
    exit 1
    ;;
  kill-all)
    for f in "$run"/*.pid; do
      if [ -f "$f" ]; then kill -KILL "$(cat "$f")" 2> /dev/null || true; fi
    done
    ;;
  *) echo "stand-in systemctl: $* is not supported" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Section 11: upload and restore of the torch sets over a limited link, as an
# instance's network is. The clients run in a network namespace this section
# makes; the gateway is reachable from there only through a veth pair on a
# private /30 (nothing else is routed), and traffic to and from the S3 port is
# shaped with tc htb + a u32 filter in both directions (netem is not in this
# kernel). The gateway listens on 127.0.0.1, so the host end forwards the port
# to it with DNAT (route_localnet on the veth only): the kernel forwards, no
# copying process shares the cores.
#
# Rate: BENCH_LINK_RATE (default 1gbit). A g5.2xlarge (8 vCPUs, one A10G, a
# mid-size GPU instance) has a baseline of about 4 Gbit/s; scaled to this
# machine's 2 cores that is about 1 Gbit/s. Needs root (ip netns, tc,
# iptables); skipped with a note otherwise.
set -euo pipefail
# shellcheck source=bench/lib.sh
. bench/lib.sh
rate=${BENCH_LINK_RATE:-1gbit}
md="$OUT/12-link.md"
tsv="$OUT/link.tsv"
if [ "$(id -u)" != 0 ] || ! command -v tc > /dev/null || ! command -v iptables > /dev/null; then
  printf '## 12. Limited link\n\nSkipped: needs root, tc and iptables.\n' > "$md"
  exit 0
fi

port=${SPOTGUARD_TEST_S3_ENDPOINT##*:}
port=${port%%/*}
ns="sgbench$$"
host_if="sgb$$h"
ns_if="sgb$$n"
net="10.203.$(($$ % 250)).0"
host_ip="${net%.0}.1"
ns_ip="${net%.0}.2"
cleanup() {
  iptables -t nat -D PREROUTING -i "$host_if" -p tcp -d "$host_ip" --dport "$port" \
    -j DNAT --to-destination "127.0.0.1:$port" 2> /dev/null || true
  ip link del "$host_if" 2> /dev/null || true
  ip netns del "$ns" 2> /dev/null || true
}
trap cleanup EXIT
ip netns add "$ns"
ip link add "$host_if" type veth peer name "$ns_if"
ip link set "$ns_if" netns "$ns"
ip addr add "$host_ip/30" dev "$host_if"
ip link set "$host_if" up
ip -n "$ns" addr add "$ns_ip/30" dev "$ns_if"
ip -n "$ns" link set "$ns_if" up
ip -n "$ns" link set lo up
sysctl -qw "net.ipv4.conf.$host_if.route_localnet=1"
iptables -t nat -A PREROUTING -i "$host_if" -p tcp -d "$host_ip" --dport "$port" \
  -j DNAT --to-destination "127.0.0.1:$port"
shape() {  # [netns-exec...] dev match: htb with the S3 port's traffic in a class of `rate`
  local dev=$1 match=$2
  shift 2
  "$@" tc qdisc add dev "$dev" root handle 1: htb default 20 r2q 1000
  "$@" tc class add dev "$dev" parent 1: classid 1:10 htb rate "$rate" ceil "$rate"
  "$@" tc class add dev "$dev" parent 1: classid 1:20 htb rate 10gbit
  "$@" tc filter add dev "$dev" parent 1: protocol ip prio 1 u32 match ip "$match" "$port" 0xffff flowid 1:10
}
shape "$ns_if" dport ip netns exec "$ns"  # uploads: client -> gateway
shape "$host_if" sport                     # downloads: gateway -> client

# The clients in the namespace use the veth address; the helpers of
# bench/lib.sh (stored bytes, deletes) stay on loopback, unshaped.
endpoint="http://$host_ip:$port"
bench_rclone_env
export RCLONE_CONFIG_SG_ENDPOINT=$endpoint
export SPOTGUARD_ENDPOINT=$endpoint SPOTGUARD_REGION=${SPOTGUARD_TEST_S3_REGION:-us-east-1}
export SPOTGUARD_LOG_LEVEL=warn
# An array, not a function: bench_timed runs it through /usr/bin/time.
in_ns=(ip netns exec "$ns")
aws_s3=("${in_ns[@]}" "$AWS_BIN" --endpoint-url "$endpoint" s3)

printf 'set\ttool\top\traw_bytes\tstored_bytes\twall\tcpu\n' > "$tsv"
dest="$WORK/link-restore"
row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" "$TIMED_WALL" "$TIMED_CPU" >> "$tsv"; }
restore_row() {  # set tool raw stored command...
  local set=$1 tool=$2 raw=$3 stored=$4
  shift 4
  rm -rf "$dest" && mkdir -p "$dest"
  bench_drop_caches
  bench_log "link restore $set: $tool"
  bench_timed "$@"
  bench_same_tree "$DATA/$set.sha256" "$dest"
  row "$set" "$tool" restore "$raw" "$stored"
  rm -rf "$dest"
}

for set in $(bench_sets); do
  case $set in torch-*) ;; *) continue ;; esac
  raw=$(bench_dir_bytes "$DATA/$set")
  p="$RUN_ID/link-$set"
  bench_warm "$DATA/$set"
  bench_log "link upload $set: spotguard"
  bench_timed "${in_ns[@]}" "$SG" snapshot --job "$set" --store "s3://$BUCKET/$p-sg" --dir "$DATA/$set"
  stored=$(bench_stored_bytes "$p-sg")
  row "$set" spotguard upload "$raw" "$stored"
  restore_row "$set" spotguard "$raw" "$stored" \
    "${in_ns[@]}" "$SG" restore --job "$set" --store "s3://$BUCKET/$p-sg" --to "$dest"
  bench_s3_rm "$p-sg" "$stored"

  bench_warm "$DATA/$set"
  bench_log "link upload $set: aws"
  bench_timed "${aws_s3[@]}" cp --recursive --only-show-errors "$DATA/$set" "s3://$BUCKET/$p-aws/"
  row "$set" "aws s3 cp" upload "$raw" "$raw"
  restore_row "$set" "aws s3 cp" "$raw" "$raw" \
    "${aws_s3[@]}" cp --recursive --only-show-errors "s3://$BUCKET/$p-aws/" "$dest/"
  bench_s3_rm "$p-aws" "$raw"

  bench_warm "$DATA/$set"
  bench_log "link upload $set: rclone"
  bench_timed "${in_ns[@]}" env -u AWS_CA_BUNDLE rclone copy -q "$DATA/$set" "sg:$BUCKET/$p-rc/"
  row "$set" "rclone copy" upload "$raw" "$raw"
  restore_row "$set" "rclone copy" "$raw" "$raw" \
    "${in_ns[@]}" env -u AWS_CA_BUNDLE rclone copy -q "sg:$BUCKET/$p-rc/" "$dest/"
  bench_s3_rm "$p-rc" "$raw"
done

{
  echo "## 12. Limited link: upload and restore at $rate"
  echo
  echo "Measured by \`bench/sections/12-link.sh\`: every client runs in a network namespace that reaches the gateway only"
  echo "through a veth pair on a private /30; traffic to and from the S3 port is shaped to $rate each way (tc htb, u32"
  echo "filter on the port). $rate is a g5.2xlarge's ~4 Gbit/s baseline scaled from its 8 vCPUs to this machine's 2"
  echo "cores. Uploads read from the page cache; restores start with the page cache dropped and are checked file for file"
  echo "by SHA-256. One run of each. Speedup is the other tool's wall time over spotguard's."
  echo
  echo "| set | op | tool | wall s | MB/s (raw) | CPU s | stored % | spotguard speedup |"
  echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"
  awk -F'\t' 'NR > 1 {
      k = $1 SUBSEP $3; if ($2 == "spotguard") sg[k] = $6
      rows[NR] = $0 }
    END { for (i = 2; i <= NR; i++) { split(rows[i], f, "\t"); k = f[1] SUBSEP f[3]
      printf "| %s | %s | %s | %.2f | %.0f | %.2f | %.1f | %s |\n", f[1], f[3], f[2], f[6], f[4] / f[6] / 1e6,
        f[7], 100 * f[5] / f[4], f[2] == "spotguard" ? "" : sprintf("x%.2f", f[6] / sg[k]) } }' "$tsv"
  echo
} > "$md"

#!/usr/bin/env bash
# Restores a spotguard snapshot from S3 WITHOUT spotguard, with the AWS CLI,
# jq and zstd only (docs/format.md, "Restoring without spotguard"): reads the
# manifest, fetches every frame with a ranged GET from whichever object holds
# it (references included), decodes it, and checks each frame's SHA-256 (and,
# in formats 1 and 2, each file's).
#
#   scripts/restore-by-hand.sh s3://BUCKET/PREFIX JOB OUT_DIR [SEQ]
#
# SEQ defaults to the one `latest` names (see docs/format.md on fences for a
# history with a fenced writer). Extra AWS CLI options (e.g.
# --endpoint-url http://127.0.0.1:7480) go in AWS_ARGS. Codec zstd+shuffleN
# frames are un-shuffled with python3 after `zstd -d`.
set -euo pipefail

if [[ $# -lt 3 ]]; then
  echo "usage: $0 s3://BUCKET/PREFIX JOB OUT_DIR [SEQ]" >&2
  exit 2
fi
store=${1%/}
job=$2
out=$3
read -r -a aws_args <<<"${AWS_ARGS:-}"
rest=${store#s3://}
bucket=${rest%%/*}
prefix=""
[[ $rest == */* ]] && prefix=${rest#*/}/
base="${prefix}${job}/"

get() {  # get KEY FILE [RANGE]: one object (or a byte range of it) into FILE
  local range=()
  [[ $# -ge 3 ]] && range=(--range "$3")
  aws "${aws_args[@]}" s3api get-object --bucket "$bucket" --key "$1" "${range[@]}" "$2" >/dev/null
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [[ $# -ge 4 ]]; then
  seq=$(printf '%010d' "$((10#$4))")
else
  get "${base}latest" "$work/latest"
  seq=$(tr -d '[:space:]' <"$work/latest")
fi
get "${base}snapshots/$seq/manifest.json" "$work/manifest.json"
manifest="$work/manifest.json"
case $(jq -r .format "$manifest") in
  spotguard-snapshot/1 | spotguard-snapshot/2 | spotguard-snapshot/3) ;;
  *) echo "unknown manifest format" >&2; exit 1 ;;
esac

unshuffle() {  # unshuffle N IN OUT: undo the zstd+shuffleN byte planes
  python3 - "$1" "$2" "$3" <<'PY'
import sys
n, src, dst = int(sys.argv[1]), sys.argv[2], sys.argv[3]
data = open(src, "rb").read()
g = len(data) // n
out = bytearray(len(data))
for k in range(n):
    out[k:g * n:n] = data[k * g:(k + 1) * g]
out[g * n:] = data[g * n:]
open(dst, "wb").write(out)
PY
}

mkdir -p "$out"
count=$(jq '.files | length' "$manifest")
for ((i = 0; i < count; i++)); do
  path=$(jq -r ".files[$i].path" "$manifest")
  codec=$(jq -r ".files[$i].codec" "$manifest")
  want=$(jq -r ".files[$i].sha256 // \"\"" "$manifest")
  mode=$(jq -r ".files[$i].mode" "$manifest")
  case $path in /* | ../* | */../* | */.. | ..) echo "refusing path $path" >&2; exit 1 ;; esac
  target="$out/$path"
  mkdir -p "$(dirname "$target")"
  : >"$target"
  # One line per frame: object key, offset, stored size, the SHA-256 of its
  # raw bytes ("-" in format 1, whose frames are stored sizes back to back in
  # the file's own object).
  jq -r ".files[$i] as \$f | reduce \$f.frames[] as \$fr ({at: 0, rows: []};
      if (\$fr | type) == \"number\"
      then {at: (.at + \$fr), rows: (.rows + [[\$f.key, .at, \$fr, \"-\"]])}
      else {at: .at, rows: (.rows + [[(\$fr.key // \$f.key), \$fr.offset, \$fr.stored, \$fr.sha256]])} end)
      | .rows[] | @tsv" "$manifest" >"$work/frames"
  while IFS=$'\t' read -r key offset stored frame_sha; do
    get "${base}${key}" "$work/frame" "bytes=${offset}-$((offset + stored - 1))"
    case $codec in
      none) cp "$work/frame" "$work/raw" ;;
      zstd) zstd -d -q -c "$work/frame" >"$work/raw" ;;
      zstd+shuffle2 | zstd+shuffle4)
        zstd -d -q -c "$work/frame" >"$work/planes"
        unshuffle "${codec#zstd+shuffle}" "$work/planes" "$work/raw"
        ;;
      *) echo "unknown codec $codec" >&2; exit 1 ;;
    esac
    if [[ $frame_sha != - ]]; then
      got=$(sha256sum "$work/raw" | cut -d' ' -f1)
      if [[ $got != "$frame_sha" ]]; then
        echo "$path: a frame at $key+$offset has SHA-256 $got, the manifest says $frame_sha" >&2
        exit 1
      fi
    fi
    cat "$work/raw" >>"$target"
  done <"$work/frames"
  got=$(sha256sum "$target" | cut -d' ' -f1)
  if [[ -n $want && $got != "$want" ]]; then
    echo "$path: SHA-256 $got, the manifest says $want" >&2
    exit 1
  fi
  chmod "$(printf '%o' "$((mode & 0777))")" "$target"
  echo "$path"
done

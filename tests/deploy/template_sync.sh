#!/usr/bin/env bash
# The CloudFormation template's UserData is scripts/user-data.sh: the
# committed template equals what scripts/gen-template.py generates; rendered
# as CloudFormation renders it (Fn::Sub with example parameters), it is the
# script after a block that writes bootstrap.env, it passes ShellCheck, and
# that block writes values the script reads back intact. An edited copy of
# the template is reported, so the check can fail.
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
  [ "$STORE" = s3://my-bucket/spotguard ] && [ "$PACKAGE_URL" = s3://my-bucket/spotguard-packages/0.1.0/ ]
) || fail "bootstrap.env does not read back: $(cat "$work/etc/bootstrap.env")"
echo "ok: rendered, it is the script after the bootstrap.env block ($(wc -c < "$work/user-data") bytes); ShellCheck passes; the values read back"
echo "template_sync: 2 passed, 0 failed"

# Sourced by bench/run.sh: a scratch dir $WORK (deleted on exit), the S3
# gateway of scripts/s3-server.sh (started here unless SPOTGUARD_TEST_S3_*
# names one, and stopped again on exit), and AWS credentials for awscli,
# curl, rclone and spotguard.
# shellcheck shell=bash
WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/spotguard-bench.XXXXXX")
export WORK
started_gateway=0
bench_cleanup() {
  if declare -F bench_cleanup_extra > /dev/null; then bench_cleanup_extra || true; fi
  rm -rf "$WORK"
  if [ "$started_gateway" = 1 ]; then bash scripts/s3-server.sh stop >&2 || true; fi
}
trap bench_cleanup EXIT
if [ -z "${SPOTGUARD_TEST_S3_ENDPOINT:-}" ]; then
  started_gateway=1
  eval "$(bash scripts/s3-server.sh start)"
fi
export SPOTGUARD_TEST_S3_ENDPOINT SPOTGUARD_TEST_S3_ACCESS_KEY SPOTGUARD_TEST_S3_SECRET_KEY \
  SPOTGUARD_TEST_S3_BUCKET SPOTGUARD_TEST_S3_REGION
export AWS_ACCESS_KEY_ID=$SPOTGUARD_TEST_S3_ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$SPOTGUARD_TEST_S3_SECRET_KEY
export AWS_DEFAULT_REGION=${SPOTGUARD_TEST_S3_REGION:-us-east-1}
export AWS_EC2_METADATA_DISABLED=true
export BUCKET=$SPOTGUARD_TEST_S3_BUCKET

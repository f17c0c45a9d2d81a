# Sourced by the bench scripts: a scratch dir in $work, the S3 gateway of
# scripts/s3-server.sh (started here unless SPOTGUARD_TEST_S3_* names one,
# and stopped again on exit), and AWS credentials for awscli and spotguard.
# shellcheck shell=bash
work=$(mktemp -d)
started_gateway=0
bench_cleanup() {
  rm -rf "$work"
  if [ "$started_gateway" = 1 ]; then bash scripts/s3-server.sh stop >&2 || true; fi
}
trap bench_cleanup EXIT
if [ -z "${SPOTGUARD_TEST_S3_ENDPOINT:-}" ]; then
  started_gateway=1
  eval "$(bash scripts/s3-server.sh start)"
fi
export AWS_ACCESS_KEY_ID=$SPOTGUARD_TEST_S3_ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$SPOTGUARD_TEST_S3_SECRET_KEY
export AWS_DEFAULT_REGION=${SPOTGUARD_TEST_S3_REGION:-us-east-1}
export AWS_EC2_METADATA_DISABLED=true
aws_s3() { aws --endpoint-url "$SPOTGUARD_TEST_S3_ENDPOINT" s3 "$@" --only-show-errors; }

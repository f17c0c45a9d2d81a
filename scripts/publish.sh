#!/usr/bin/env bash
# Uploads the packages scripts/package.sh built to S3 and prints the
# PackageUrl for the CloudFormation stack:
#   s3://BUCKET/spotguard-packages/VERSION/spotguard.deb   (Debian, Ubuntu)
#   s3://BUCKET/spotguard-packages/VERSION/spotguard.rpm   (Amazon Linux)
# user-data.sh on the instance picks the one its distribution installs. The
# stack's instance role may read spotguard-packages/* of its bucket.
#   scripts/publish.sh s3://BUCKET [PACKAGE_DIR]     (PACKAGE_DIR: build/package)
# Extra arguments for `aws` (e.g. --endpoint-url, --profile) come from
# SPOTGUARD_AWS_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:?usage: scripts/publish.sh s3://BUCKET [PACKAGE_DIR]}
pkgdir=${2:-build/package}
case "$dest" in
  s3://*) ;;
  *) echo "publish.sh: the destination must be s3://BUCKET, not $dest" >&2; exit 2 ;;
esac
bucket=${dest#s3://}
bucket=${bucket%%/*}
deb=$(find "$pkgdir" -maxdepth 1 -name 'spotguard_*_amd64.deb' | sort | tail -n 1)
rpm=$(find "$pkgdir" -maxdepth 1 -name 'spotguard-*.x86_64.rpm' | sort | tail -n 1)
if [ -z "$deb" ] || [ -z "$rpm" ]; then
  echo "publish.sh: no .deb and .rpm in $pkgdir; build them with scripts/package.sh" >&2
  exit 1
fi
version=$(dpkg-deb -f "$deb" Version)
url=s3://$bucket/spotguard-packages/$version/
read -r -a aws_args <<< "${SPOTGUARD_AWS_ARGS:-}"
aws "${aws_args[@]}" s3 cp --only-show-errors "$deb" "${url}spotguard.deb" >&2
aws "${aws_args[@]}" s3 cp --only-show-errors "$rpm" "${url}spotguard.rpm" >&2
echo "publish.sh: uploaded $(basename "$deb") and $(basename "$rpm") to $url" >&2
echo "PackageUrl=$url"

#!/bin/sh
# minio-init (docker-compose.yml), run once per `docker compose up` with MinIO's root account (MC_HOST_minio):
# the checkpoint and dataset buckets, and the service's own user with a policy limited to them. Every step is
# idempotent: re-running it changes nothing, except that a changed APP_PASSWORD replaces the user's secret.
#
#   CHECKPOINT_BUCKET  read and written: checkpoints, scans sent to POST /segment and their results
#   DATASETS_BUCKET    read only: labelled datasets, which operators upload (README.md, "Labelled data")
#   APP_USER, APP_PASSWORD  the service's credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY of its processes)
set -eu

: "${CHECKPOINT_BUCKET:?}" "${DATASETS_BUCKET:?}" "${APP_USER:?}" "${APP_PASSWORD:?}"
POLICY=veernet-app
policy_file=/tmp/$POLICY-policy.json  # this one-shot container's own /tmp

mc mb --ignore-existing "minio/$CHECKPOINT_BUCKET" "minio/$DATASETS_BUCKET"

# ListBucket on both: without it S3 answers a missing key with 403 instead of 404, and the service could no
# longer tell a missing checkpoint or manifest from a refused one.
cat > "$policy_file" <<EOF
{
  "Version": "2012-10-17",
  "Statement": [
    {"Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation"],
     "Resource": ["arn:aws:s3:::$CHECKPOINT_BUCKET", "arn:aws:s3:::$DATASETS_BUCKET"]},
    {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
     "Resource": ["arn:aws:s3:::$CHECKPOINT_BUCKET/*"]},
    {"Effect": "Allow", "Action": ["s3:GetObject"],
     "Resource": ["arn:aws:s3:::$DATASETS_BUCKET/*"]}
  ]
}
EOF
mc admin policy create minio "$POLICY" "$policy_file"  # replaces the policy of an earlier run
mc admin user add minio "$APP_USER" "$APP_PASSWORD"  # an existing user: its secret is replaced
mc admin policy attach minio "$POLICY" --user "$APP_USER"  # already attached: mc skips it
echo "minio-init: buckets $CHECKPOINT_BUCKET (read-write) and $DATASETS_BUCKET (read-only) for user $APP_USER"

"""Uploads every file below a folder to an S3 bucket (boto3, which moto
brings): the remote benchmark (``remote_read.py``) and the remote tests
(``crates/robocache-datasets/tests/support/servers.rs``) put their datasets
on a local moto server with it.

    python benches/s3_upload.py ENDPOINT BUCKET DIR PREFIX   # prints the bytes uploaded
"""

import os
import sys


def upload(endpoint, bucket, local_dir, prefix):
    """Every file below ``local_dir`` to ``s3://bucket/prefix/...``, one PUT
    each (no multipart below 1 GiB); the bucket is made when missing.
    Returns the bytes uploaded."""
    import boto3
    from boto3.s3.transfer import TransferConfig

    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
    try:
        client.create_bucket(Bucket=bucket)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    total = 0
    config = TransferConfig(multipart_threshold=1 << 30)
    for dirpath, _, files in os.walk(local_dir):
        for name in files:
            path = os.path.join(dirpath, name)
            key = f"{prefix}/{os.path.relpath(path, local_dir)}"
            client.upload_file(path, bucket, key, Config=config)
            total += os.path.getsize(path)
    return total


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    print(upload(*sys.argv[1:]))

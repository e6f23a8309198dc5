"""Model weights from object storage: ``s3://bucket/prefix`` downloaded with boto3.

Seed 004 (Datashim A/B) keeps weights in S3-compatible storage. The endpoint URL comes from
the deployment (``s3_endpoint_url``) or ``AWS_ENDPOINT_URL`` (MinIO and friends); credentials
come only from the environment through boto3's own chain, and are never logged or written.
A second download of an unchanged prefix transfers nothing: files whose size matches the
object are kept.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

from testbed.core.errors import InfrastructureError, InputError, MissingDependency


def split_url(url: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` → ``("bucket", "a/b")``."""
    rest = url.removeprefix("s3://")
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise InputError(f"{url!r} names no bucket; write s3://bucket/prefix")
    return bucket, prefix.strip("/")


def client(endpoint_url: str | None = None) -> Any:
    """A boto3 S3 client; ``endpoint_url`` (or ``AWS_ENDPOINT_URL``) selects a compatible store."""
    try:
        import boto3
    except ImportError as exc:
        raise MissingDependency("boto3", "s3") from exc
    url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
    return boto3.client("s3", endpoint_url=url)


def download_prefix(url: str, cache: Path, endpoint_url: str | None = None) -> Path:
    """Download every object under ``url`` into ``cache/bucket/prefix``; return that folder."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = split_url(url)
    dest = cache.joinpath(bucket, *PurePosixPath(prefix).parts)
    s3 = client(endpoint_url)
    count = 0
    try:
        paginator = s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=bucket, Prefix=f"{prefix}/" if prefix else ""):
            for obj in page.get("Contents", []):
                key: str = obj["Key"]
                if key.endswith("/"):
                    continue  # a "folder" marker object
                relative = PurePosixPath(key).relative_to(prefix) if prefix else PurePosixPath(key)
                if ".." in relative.parts:
                    raise InfrastructureError(f"refusing object key {key!r} outside {url}")
                target = dest.joinpath(*relative.parts)
                count += 1
                if target.is_file() and target.stat().st_size == obj["Size"]:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_name(f".{target.name}.partial")
                s3.download_file(bucket, key, str(partial))
                partial.replace(target)
    except (BotoCoreError, ClientError) as exc:
        # The message of a boto error names the operation and bucket, never the credentials.
        raise InfrastructureError(f"downloading {url} failed: {exc}") from exc
    if count == 0:
        raise InputError(f"no objects under {url}; check the bucket and prefix")
    return dest

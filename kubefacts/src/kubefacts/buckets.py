"""Copying S3 (and MinIO-compatible) objects to local files with boto3, for both sides.

testbed downloads model weights from a prefix (``testbed.results.s3``); kubemu's Datashim
and KServe storage initializer copy a bucket into a claim or a model folder. Both use
:func:`client`, :func:`copy_objects` and :func:`translated` here. Credentials come from the
environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, optionally
``AWS_SESSION_TOKEN``), or from the caller's ``keys`` (a Dataset's Secret); they are never
logged. boto3 is optional and imported lazily.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

from kubefacts.errors import InfrastructureError, InputError, MissingDependency

#: The part of a ranged, parallel download (bytes; boto3's default is 8 MiB). Weights are
#: files of hundreds of MB to tens of GB: 64 MiB parts are 16 requests per GiB rather than
#: 128, still ten at a time; a server that reads the whole object for each range (moto does)
#: pays that per part.
DOWNLOAD_PART = 64 << 20


def client(endpoint_url: str | None = None, keys: tuple[str, str] | None = None) -> Any:
    """A boto3 S3 client; credentials from the environment, or ``keys`` (id, secret) when a
    caller holds them (the emulator's Datashim reads them from a Dataset's Secret)."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError as exc:
        raise MissingDependency("boto3", "pip install boto3") from exc
    key, secret = keys or (
        os.environ.get("AWS_ACCESS_KEY_ID"),
        os.environ.get("AWS_SECRET_ACCESS_KEY"),
    )
    if not key or not secret:
        raise InputError(
            "S3 access needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment"
            " (S3 credentials are read from the environment only); export them and retry"
        )
    session = boto3.session.Session(
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        aws_session_token=None if keys else os.environ.get("AWS_SESSION_TOKEN") or None,
        region_name=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None,
    )
    url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
    config = Config(retries={"max_attempts": 5, "mode": "standard"})
    return session.client("s3", endpoint_url=url, config=config)


def copy_objects(s3: Any, bucket: str, prefix: str, dest: Path) -> int:
    """Copy every object under ``prefix`` of ``bucket`` into ``dest`` (keys relative to the
    prefix); the number of objects. Files whose size matches their object are kept."""
    from boto3.s3.transfer import TransferConfig

    parts = TransferConfig(multipart_threshold=DOWNLOAD_PART, multipart_chunksize=DOWNLOAD_PART)
    count = 0
    paginator = s3.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=f"{prefix}/" if prefix else ""):
        for obj in page.get("Contents", []):
            key: str = obj["Key"]
            if key.endswith("/"):
                continue  # a "folder" marker object
            relative = PurePosixPath(key).relative_to(prefix) if prefix else PurePosixPath(key)
            if ".." in relative.parts:
                raise InfrastructureError(f"refusing object key {key!r} outside s3://{bucket}")
            target = dest.joinpath(*relative.parts)
            count += 1
            if target.is_file() and target.stat().st_size == obj["Size"]:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.partial")
            s3.download_file(bucket, key, str(partial), Config=parts)
            partial.replace(target)
    return count


def copy_bucket(bucket: str, dest: Path, endpoint_url: str | None, keys: tuple[str, str]) -> int:
    """Every object of ``bucket`` into ``dest`` with the given keys; the number of objects."""
    with translated(f"copying s3://{bucket} from {endpoint_url or 'AWS'}"):
        return copy_objects(client(endpoint_url, keys), bucket, "", dest)


@contextmanager
def translated(doing: str) -> Iterator[None]:
    """Turn boto's errors (and I/O errors) inside the block into an InfrastructureError."""
    from boto3.exceptions import Boto3Error
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as exc:
        # boto's messages name the operation, bucket and endpoint — never the credentials.
        code = exc.response.get("Error", {}).get("Code", "")
        hint = " (check the bucket name, or create the bucket)" if code == "NoSuchBucket" else ""
        raise InfrastructureError(f"{doing} failed: {code or exc}{hint}") from exc
    except (Boto3Error, BotoCoreError, OSError) as exc:
        raise InfrastructureError(f"{doing} failed: {exc}") from exc

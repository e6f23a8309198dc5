"""Expanding a campaign into its plan — a pure function.

The same campaign gives the same plan, in the same order, with the same ids. A treatment's
id hashes its fully resolved configuration (its worker's resolved deployment, its probe and
the probe's resolved section); factors that do not change a probe's configuration do not
multiply its treatments (a ``load.concurrency`` sweep runs the correctness cases once per
worker). Resolved deployments and probe sections are validated once per distinct value and
cached, which keeps 100,000 treatments within a couple of seconds.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from pydantic import ValidationError

from testbed.config.ab import AbProbe
from testbed.config.campaign import Campaign
from testbed.config.correctness import CorrectnessProbe, split_sections
from testbed.config.deployments import deployment_model, worker_gpus
from testbed.config.diagnostics import dotted
from testbed.config.load import LoadProbe
from testbed.config.loader import LoadedCampaign
from testbed.config.overrides import assign, targets
from testbed.config.probe_settings import (
    PROBES,
    SETTINGS,
    ProbeName,
    ProbeSettings,
    section_document,
)
from testbed.config.protocols import FIELDS, unreachable
from testbed.config.server_kinds import gpu_note
from testbed.core.errors import CampaignError
from testbed.core.ids import short_hash, slugify
from testbed.plan.model import Plan, Treatment, Worker
from testbed.plan.model_fit import model_fit
from testbed.plan.points import Level, Point, matrix_points

_SECTIONS = ("deployments", *PROBES)


def expand(loaded: LoadedCampaign) -> Plan:
    """The plan of a loaded campaign. Raises CampaignError for combinations that break a
    server's rules (naming the factor values and the fix)."""
    return _Expander(loaded).run()


class _Expander:
    def __init__(self, loaded: LoadedCampaign) -> None:
        self.loaded = loaded
        self.campaign: Campaign = loaded.campaign
        self.base = self.campaign.model_dump(mode="json", exclude={"presets"})
        self.active: list[ProbeName] = [p for p in PROBES if self.base.get(p) is not None]
        self.workers: dict[str, Worker] = {}
        self.treatments: list[Treatment] = []
        self.probe_configs: dict[str, ProbeSettings] = {}
        self.seen: set[str] = set()
        self._deployment_cache: dict[tuple[str, ...], list[Worker]] = {}
        self._probe_cache: dict[tuple[str, tuple[Any, ...]], str] = {}
        self.worker_slugs: dict[str, tuple[str, list[str]]] = {}
        self.slug = slugify(self.campaign.name, 30)
        self._unfit: dict[str, str] = {}
        self._notes: list[str] = []  # what the plan says beside its tables (gpu_note)
        self._check_factors()

    def _check_factors(self) -> None:
        matrix = self.campaign.matrix
        factors = list(matrix.factors) if matrix else []
        for entry in matrix.include if matrix else []:
            factors += [f for f in entry if f not in factors]
        for factor in factors:
            root = factor.split(".", 1)[0]
            where = self._where(("matrix", "factors", factor))
            if root not in _SECTIONS:
                raise CampaignError(
                    f"{where}: matrix factor '{factor}' must vary a deployment or a probe"
                    f" (start it with one of {', '.join(_SECTIONS)})"
                )
            if self.base.get(root) is None:
                raise CampaignError(
                    f"{where}: matrix factor '{factor}' varies `{root}:`, which the campaign"
                    f" does not have — add a {root}: section or remove the factor"
                )
            try:
                targets(self.base, factor)  # raises for malformed keys
            except CampaignError as exc:  # placed at the factor, like the errors above
                raise CampaignError(f"{where}: matrix factor '{factor}': {exc}") from None
        for name in self.campaign.execution.unroll:
            if name not in factors:
                raise CampaignError(
                    f"{self._where(('execution', 'unroll'))}: unroll names '{name}', which is"
                    " not a matrix factor — add it to matrix.factors or remove it"
                )
        self.factors = factors

    def _where(self, path: tuple[str | int, ...]) -> str:
        origin = self.loaded.provenance.nearest(path, key=True)
        return origin.describe() if origin else self.loaded.file

    def run(self) -> Plan:
        for point in matrix_points(self.campaign.matrix):
            self._add_point(point)
        notes = sorted((set(self._unfit.values()) | set(self._notes)) - {""})
        # Worker-major order reads best and matches execution (a worker serves its
        # treatments one after the other); indices are assigned after sorting.
        order = {wid: i for i, wid in enumerate(self.workers)}
        self.treatments.sort(key=lambda t: (order[t.workers[0]] if t.workers else -1, t.index))
        for number, treatment in enumerate(self.treatments, start=1):
            treatment.index = number
        return Plan(self.campaign.name, self.workers, self.treatments, self.probe_configs, notes)

    def _add_point(self, point: Point) -> None:
        dep = [lv for lv in point if lv.factor.startswith("deployments.")]
        workers = self._resolve_deployments(dep)
        for probe in self.active:
            mine = [lv for lv in point if lv.factor.split(".", 1)[0] == probe]
            if probe == "correctness":  # one section per suite, each with its deployments
                written = self.campaign.correctness
                for suite in range(max(1, len(written.suites) if written else 0)):
                    self._add_section(probe, self._resolve_probe(probe, mine, suite), workers, mine)
            else:
                self._add_section(probe, self._resolve_probe(probe, mine), workers, mine)

    def _add_section(
        self, probe: ProbeName, probe_hash: str, workers: list[Worker], mine: list[Level]
    ) -> None:
        """The treatments of one resolved probe section on the point's workers: one per
        deployment it runs against (correctness, load), the named pair (ab), none (scale)."""
        section = self.probe_configs[f"{probe}:{probe_hash}"]
        if isinstance(section, CorrectnessProbe | LoadProbe):
            for worker in workers:
                if section.deployments is None or worker.deployment in section.deployments:
                    self._add(probe, (worker,), probe_hash, mine)
        elif isinstance(section, AbProbe):
            pair = {w.deployment: w for w in workers}
            self._add(probe, (pair[section.stable], pair[section.canary]), probe_hash, mine)
        else:
            self._add(probe, (), probe_hash, mine)

    def _add(
        self, probe: ProbeName, workers: tuple[Worker, ...], probe_hash: str, mine: list[Level]
    ) -> None:
        ids = ",".join(w.id for w in workers)
        tid = hashlib.sha256(f"{probe}|{probe_hash}|{ids}".encode()).hexdigest()[:10]
        if tid in self.seen:
            return
        self.seen.add(tid)
        self._check_reach(probe, workers, probe_hash, mine)
        params: dict[str, Any] = {}
        names = [self.worker_slugs[w.id] for w in workers]
        parts = ["-vs-".join(n for n, _ in names) or self.slug, probe]
        for worker, (_, slugs) in zip(workers, names, strict=True):
            params.update(worker.params)
            parts.extend(slugs)
        for lv in mine:
            params[lv.factor] = lv.value
            parts.append(lv.slug)
        slug = "-".join(parts)[:60].rstrip("-")
        reason = next((self._unfit[w.id] for w in workers if self._unfit.get(w.id)), "")
        self.treatments.append(
            Treatment(
                index=len(self.treatments) + 1,
                id=tid,
                slug=slug,
                probe=probe,
                workers=tuple(w.id for w in workers),
                probe_key=f"{probe}:{probe_hash}",
                params=params,
                status="skipped" if reason else "planned",
                reason=reason,
            )
        )

    def _check_reach(
        self, probe: ProbeName, workers: tuple[Worker, ...], probe_hash: str, mine: list[Level]
    ) -> None:
        """A treatment whose probe asks a protocol its server does not serve is refused
        (a matrix may vary either side; the campaign as written was checked already)."""
        section = self.probe_configs[f"{probe}:{probe_hash}"]
        for worker in workers:
            problem = unreachable(probe, section.asks, worker.config)
            if problem is not None:
                levels = {**worker.params, **{lv.factor: lv.value for lv in mine}}
                combo = ", ".join(f"{f}={v}" for f, v in levels.items()) or "no factors"
                raise CampaignError(
                    f"{self._where(('matrix', 'factors'))}: with {combo}:"
                    f" {probe}.{FIELDS[probe]}: {problem} — or"
                    " exclude this combination in matrix.exclude"
                )

    def _resolve_deployments(self, dep: list[Level]) -> list[Worker]:
        key = tuple(lv.key for lv in dep)
        cached = self._deployment_cache.get(key)
        if cached is not None:
            return cached
        doc = {"deployments": copy.deepcopy(self.base["deployments"])}
        touched: dict[int, list[Level]] = {}
        for lv in dep:
            for path in targets(doc, lv.factor):
                assign(doc, path, lv.value)
                touched.setdefault(int(path[1]), []).append(lv)
        workers = []
        for index, raw in enumerate(doc["deployments"]):
            workers.append(self._worker(index, raw, touched.get(index, [])))
        self._deployment_cache[key] = workers
        return workers

    def _worker(self, index: int, raw: dict[str, Any], levels: list[Level]) -> Worker:
        params = {lv.factor: lv.value for lv in levels}
        try:
            model = deployment_model(raw)
        except ValidationError as exc:
            combo = ", ".join(f"{f}={v}" for f, v in params.items())
            problems = "; ".join(
                f"{dotted(tuple(e['loc'][1:]))}: {e['msg'].removeprefix('Value error, ')}"
                for e in exc.errors(include_url=False)
            )
            raise CampaignError(
                f"{self._where(('matrix', 'factors'))}: deployment '{raw.get('name')}' with"
                f" {combo or 'no factors'} is invalid: {problems} — or exclude this combination"
                " in matrix.exclude"
            ) from None
        config = model.model_dump(mode="json")
        wid = f"{model.name}-{short_hash(config, 8)}"
        if wid not in self.workers:
            raw_doc = self.loaded.document["deployments"][index]
            written = raw_doc.get("params") or raw_doc.get("values") or {}  # a stack's values
            factors = {
                f.rsplit(".", 1)[-1]: v
                for f, v in params.items()
                if ".params." in f or ".values." in f
            }
            settings = {**written, **factors}
            self.workers[wid] = Worker(wid, model.name, model.server, model, params, settings)
            self.worker_slugs[wid] = (slugify(model.name, 30), [lv.slug for lv in levels])
            fit = model_fit(model)
            self._unfit[wid] = "" if fit is None or fit.fits else fit.reason()
            self._notes.append(gpu_note(model, worker_gpus(model)))
        return self.workers[wid]

    def _resolve_probe(self, probe: ProbeName, mine: list[Level], suite: int = 0) -> str:
        key = (probe, (*(lv.key for lv in mine), suite))
        cached = self._probe_cache.get(key)
        if cached is None:
            doc: dict[str, Any] = {probe: copy.deepcopy(self.base[probe])}
            for lv in mine:
                for path in targets(doc, lv.factor):
                    assign(doc, path, lv.value)
            raw = split_sections(doc[probe])[suite] if probe == "correctness" else doc[probe]
            section = self._validate_probe(probe, raw, mine)
            # the id hashes the section as plan.json shows it: every field, defaults included
            cached = self._probe_cache[key] = short_hash(section_document(section))
            self.probe_configs[f"{probe}:{cached}"] = section
        return cached

    def _validate_probe(
        self, probe: ProbeName, raw: dict[str, Any], mine: list[Level]
    ) -> ProbeSettings:
        try:
            return SETTINGS[probe].model_validate(raw)
        except ValidationError as exc:
            combo = ", ".join(f"{lv.factor}={lv.value}" for lv in mine)
            problems = "; ".join(
                f"{probe}.{dotted(tuple(e['loc']))}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
            raise CampaignError(
                f"{self._where(('matrix', 'factors'))}: with {combo}: {problems}"
            ) from None

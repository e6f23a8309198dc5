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
from typing import Any

from pydantic import TypeAdapter, ValidationError

from testbed.config.campaign import Campaign
from testbed.config.deployments import Deployment
from testbed.config.diagnostics import dotted
from testbed.config.loader import LoadedCampaign
from testbed.config.overrides import assign, targets
from testbed.core.errors import CampaignError
from testbed.core.ids import canonical_json, short_hash, slugify
from testbed.plan.capacity import estimate
from testbed.plan.model import PROBES, Plan, ProbeName, Treatment, Worker
from testbed.plan.points import Point, matrix_points

_DEPLOYMENT = TypeAdapter(Deployment)
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
        self.probe_configs: dict[str, dict[str, Any]] = {}
        self.seen: set[str] = set()
        self._deployment_cache: dict[tuple[str, ...], list[Worker]] = {}
        self._probe_cache: dict[tuple[str, tuple[str, ...]], tuple[str, dict[str, Any]]] = {}
        self._capacity: dict[str, str] = {}
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
            targets(self.base, factor)  # raises for malformed keys
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
            keyed = [(f, v, canonical_json(v)) for f, v in point]
            self._add_point(keyed)
        notes = sorted(set(self._capacity.values()) - {""})
        # Worker-major order reads best and matches execution (a worker serves its
        # treatments one after the other); indices are assigned after sorting.
        order = {wid: i for i, wid in enumerate(self.workers)}
        self.treatments.sort(key=lambda t: (order[t.workers[0]] if t.workers else -1, t.index))
        for number, treatment in enumerate(self.treatments, start=1):
            treatment.index = number
        return Plan(self.campaign.name, self.workers, self.treatments, self.probe_configs, notes)

    def _add_point(self, keyed: list[tuple[str, Any, str]]) -> None:
        dep = [(f, v, k) for f, v, k in keyed if f.startswith("deployments.")]
        workers = self._resolve_deployments(dep)
        for probe in self.active:
            mine = [(f, v, k) for f, v, k in keyed if f.split(".", 1)[0] == probe]
            probe_hash, params = self._resolve_probe(probe, mine)
            if probe in ("correctness", "load"):
                for worker in workers:
                    self._add(probe, (worker,), probe_hash, {**worker.params, **params})
            elif probe == "ab":
                by_name = {w.deployment: w for w in workers}
                pair = (by_name[self.base["ab"]["stable"]], by_name[self.base["ab"]["canary"]])
                self._add(probe, pair, probe_hash, {**pair[0].params, **pair[1].params, **params})
            else:
                self._add(probe, (), probe_hash, params)

    def _add(
        self, probe: ProbeName, workers: tuple[Worker, ...], probe_hash: str, params: dict[str, Any]
    ) -> None:
        tid = short_hash([probe, probe_hash, [w.id for w in workers]])
        if tid in self.seen:
            return
        self.seen.add(tid)
        label = "-vs-".join(w.deployment for w in workers) or self.campaign.name
        slug = slugify("-".join([label, probe, *(f"{f.rsplit('.', 1)[-1]}-{v}" for f, v in params.items())]))
        reason = next((self._capacity[w.id] for w in workers if self._capacity.get(w.id)), "")
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

    def _resolve_deployments(self, dep: list[tuple[str, Any, str]]) -> list[Worker]:
        key = tuple(k for _, _, k in dep)
        cached = self._deployment_cache.get(key)
        if cached is not None:
            return cached
        doc = {"deployments": copy.deepcopy(self.base["deployments"])}
        touched: dict[int, dict[str, Any]] = {}
        for factor, value, _ in dep:
            for path in targets(doc, factor):
                assign(doc, path, value)
                touched.setdefault(int(path[1]), {})[factor] = value
        workers = []
        for index, raw in enumerate(doc["deployments"]):
            workers.append(self._worker(index, raw, touched.get(index, {})))
        self._deployment_cache[key] = workers
        return workers

    def _worker(self, index: int, raw: dict[str, Any], params: dict[str, Any]) -> Worker:
        try:
            model = _DEPLOYMENT.validate_python(raw)
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
            written = self.loaded.document["deployments"][index].get("params") or {}
            factors = {f.rsplit(".", 1)[-1]: v for f, v in params.items() if ".params." in f}
            settings = {**written, **factors}
            self.workers[wid] = Worker(wid, model.name, model.server, config, params, settings)
            fit = estimate(config)
            self._capacity[wid] = "" if fit is None or fit.fits else fit.reason()
        return self.workers[wid]

    def _resolve_probe(
        self, probe: ProbeName, mine: list[tuple[str, Any, str]]
    ) -> tuple[str, dict[str, Any]]:
        key = (probe, tuple(k for _, _, k in mine))
        cached = self._probe_cache.get(key)
        if cached is None:
            doc = {probe: copy.deepcopy(self.base[probe])}
            for factor, value, _ in mine:
                for path in targets(doc, factor):
                    assign(doc, path, value)
            section = self._validate_probe(probe, doc[probe], mine)
            probe_hash = short_hash(section)
            self.probe_configs[f"{probe}:{probe_hash}"] = section
            cached = self._probe_cache[key] = (probe_hash, section)
        return cached[0], {f: v for f, v, _ in mine}

    def _validate_probe(
        self, probe: ProbeName, raw: dict[str, Any], mine: list[tuple[str, Any, str]]
    ) -> dict[str, Any]:
        model_type = type(getattr(self.campaign, probe))
        try:
            return model_type.model_validate(raw).model_dump(mode="json")  # type: ignore[no-any-return]
        except ValidationError as exc:
            combo = ", ".join(f"{f}={v}" for f, v, _ in mine)
            problems = "; ".join(
                f"{probe}.{dotted(tuple(e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)
            )
            raise CampaignError(
                f"{self._where(('matrix', 'factors'))}: with {combo}: {problems}"
            ) from None

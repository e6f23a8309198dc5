"""Cases that cannot be said over TGIS's gRPC, refused before a run starts.

A case's ``extra`` is sent verbatim: OpenAI top-level fields over OpenAI, TGI parameters
over TGI, and over TGIS into ``fmaas.Parameters`` (TGI's names moved to where TGIS keeps
them). A field only OpenAI has — ``extra: {model: …}``, ``logit_bias`` — has no place in
TGIS's request: TGIS would refuse the request, and the case would be an ERROR at run time.
So each ``extra`` field of a case that runs over ``tgis`` is put into a real TGIS request
message now; one that does not fit is a CampaignError (exit 2) naming the case, the field and
its file:line. Chat cases are not checked: over TGIS they are SKIPPED with their reason.
"""

from __future__ import annotations

from collections.abc import Iterable

from testbed.clients.apis import APIS
from testbed.clients.tgis import request_message
from testbed.config.correctness import CorrectnessProbe
from testbed.core.errors import CampaignError, InputError
from testbed.probes.correctness.cases import CaseFile
from testbed.probes.correctness.exchange import build_body
from testbed.probes.correctness.runner import protocols_of


def refuse_openai_only_fields(files: Iterable[CaseFile], config: CorrectnessProbe) -> None:
    """Raise CampaignError for every ``extra`` field TGIS's request cannot carry."""
    problems = []
    for case_file in files:
        for case in case_file.cases:
            spec = case.request
            if "tgis" not in protocols_of(case, config) or spec.chat:
                continue
            for key, value in spec.extra.items():
                alone = spec.model_copy(update={"extra": {key: value}})
                body = build_body(APIS["tgis"], alone, "model", None)
                try:
                    request_message(body, stream=False)
                except InputError:
                    where = case_file.extra_places.get((case.name, key), str(case_file.path))
                    problems.append(
                        f"{where}: case '{case.name}' runs over protocol tgis, but"
                        f" request.extra.{key} is not a field of TGIS's request"
                        " (fmaas.Parameters) — it is only OpenAI's or TGI's; remove it, or give"
                        " the case protocol: openai (or tgi)"
                    )
    if problems:
        raise CampaignError("\n".join(problems))

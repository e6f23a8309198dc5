"""Which protocols a case runs on: a chat case only where the protocol has a chat API."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.config.correctness import CorrectnessProbe
from testbed.probes.correctness.cases import Case, CaseFile
from testbed.probes.correctness.runner import plan_items

CHAT = Case.model_validate(
    {
        "name": "chat",
        "request": {"messages": [{"role": "user", "content": "x"}]},
        "skip_check": True,
    }
)
TEXT = Case.model_validate({"name": "text", "request": {"prompt": "x"}, "skip_check": True})


@pytest.mark.parametrize(("protocol", "others"), [("both", ["tgi"]), ("tgis", ["tgis"])])
def test_a_chat_case_is_skipped_where_the_protocol_has_no_chat_api(
    protocol: str, others: list[str]
) -> None:
    config = CorrectnessProbe.model_validate({"cases": ["c.yaml"], "protocol": protocol})
    files = [CaseFile(Path("c.yaml"), [CHAT, TEXT])]
    items, skipped = plan_items(files, config, {"server": "sim"}, ["openai", "tgi", "tgis"])
    ran = sorted((i.case.name, i.protocol) for i in items)
    assert ("text", others[0]) in ran
    assert [(s.case, s.protocol, s.reason) for s in skipped] == [
        (CHAT.name, p, "a chat case needs the OpenAI protocol") for p in others
    ]
    assert (("chat", "openai") in ran) == (protocol == "both")

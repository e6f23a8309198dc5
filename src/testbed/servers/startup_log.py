"""The root cause of a server that died at start, read from its log.

"exited with code 1" says nothing; the log does, somewhere above a wall of tracebacks. vLLM,
for one, prints the real error in its engine process (``ValueError: Available memory on
node 0 …``) and then, in the API server, a wrapper ("RuntimeError: Engine core
initialization failed. See root cause above."). The cause is, first found:

1. testbed's own last ``testbed: error: …`` line (the reference server and the simulator
   say exactly what went wrong);
2. the last exception line (``SomeError: message``, with any ``(EngineCore pid=…)`` or
   ``[rank0]:`` prefix removed) that does not merely point at another one;
3. argparse's ``error:`` line (a bad flag);
4. nothing — the caller shows the tail of the log anyway.
"""

from __future__ import annotations

import re

_PREFIX = re.compile(
    r"^(?:\([\w .-]+ pid=\d+\)\s*|\[rank\d+\]:\s*|ERROR\s[\d-]+\s[\d:.]+\s\[[^]]*\]\s*)+"
)
_EXCEPTION = re.compile(
    r"^((?:[A-Za-z_]\w*\.)*(?:Exception|[A-Z]\w*(?:Error|Exception|Exit|Interrupt))): (.+)$"
)
#: Wrappers that only point at the real error printed before them.
_POINTERS = ("root cause", "see above", "see the error above", "see stack trace")
_ARGPARSE = re.compile(r"^[\w.-]+(?:\.py)?: error: (.+)$")
MAX_CHARS = 400


def root_cause(log: str) -> str | None:
    """The line of ``log`` that names why the server stopped, shortened; None if none does."""
    lines = [_PREFIX.sub("", line.strip()) for line in log.splitlines()]
    own = [line for line in lines if line.startswith("testbed: error: ")]
    if own:
        return _short(own[-1].removeprefix("testbed: error: "))
    exceptions = [line for line in lines if _EXCEPTION.match(line)]
    real = [line for line in exceptions if not any(p in line.lower() for p in _POINTERS)]
    if real or exceptions:
        return _short((real or exceptions)[-1])
    usage = [m.group(1) for line in lines if (m := _ARGPARSE.match(line))]
    return _short(usage[-1]) if usage else None


def _short(text: str) -> str:
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "…"

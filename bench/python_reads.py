"""Run a bench script as testbed runs when installed without a C compiler: Python reads only.

Blocks the import of the compiled per-read path (``testbed.clients._readpath``), so that
``testbed.clients.readpath.compiled`` is None, then runs the script as ``python script …``
would — the same figures, of the Python classes alone. Compare with the script run plainly,
alternating the two (the machine's noise is larger than the difference on a busy host):

    PYTHONPATH=src:bench .venv/bin/python bench/python_reads.py bench/load_cost.py \
        --only parse,floor,stream --repeat 1
"""

from __future__ import annotations

import runpy
import sys

if len(sys.argv) < 2:
    raise SystemExit("usage: python_reads.py SCRIPT [ARGS...]")
sys.modules["testbed.clients._readpath"] = None  # type: ignore[assignment]  # import fails
script, *args = sys.argv[1:]
sys.argv = [script, *args]
runpy.run_path(script, run_name="__main__")

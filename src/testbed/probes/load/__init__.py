"""The load probe: a fast, self-checking load generator (profiles, datasets, SLOs, plots).

Public API: :func:`run` (the probe contract of :mod:`testbed.probes.base`). The modules:
``dataset`` (prompts), ``tokens`` (client-side counting), ``schedule`` (arrivals and
precise waiting), ``runner`` (the generator), ``profiles`` (stages), ``multiprocess``
(several load processes), ``selfcheck``, ``summary`` and ``plots``.
"""

from testbed.probes.load.probe import run

__all__ = ["run"]

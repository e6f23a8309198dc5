"""The scale probe: Run:ai's scale test (seed 003) — submit, sample, plot, judge.

Public API: :func:`run` (the probe contract of :mod:`testbed.probes.base`); the command line
(``testbed scale submit|sample|plot|nodes|clean``) uses the modules directly. The modules:
``template`` (workloads from Jinja2 YAML), ``submit`` and ``submitted`` (the submitter and
its JSON lines), ``watch`` lives in ``clients.kube``; ``sample``, ``stages`` and ``sampled``
(the sampler and its mergeable facts), ``times`` (the table), ``survival`` (Kaplan–Meier),
``verdict`` (thresholds), ``plots``, ``analysis`` (the plotter's step), ``nodes`` (KWOK).
"""

from testbed.probes.scale.probe import run

__all__ = ["run"]

"""Profiles as lists of stages: synchronous, concurrency, rate (one rate, or ``load.stages``:
several in a row), ramp and the adaptive sweep.

A sweep is planned in two steps (as guidellm does): a synchronous stage (one request at a
time) and a saturation stage (``sweep.max_concurrency`` in flight) measure the lowest and
highest useful throughputs; then ``sweep.rates`` open-loop stages are spread evenly
strictly between them.
"""

from __future__ import annotations

from testbed.config.load import DEFAULT_DURATION_S, LoadProbe
from testbed.probes.load.runner import Stage
from testbed.probes.load.schedule import Arrivals


def _stage(config: LoadProbe, name: str, **kind: object) -> Stage:
    return Stage(
        name=name,
        duration_s=config.stage_duration_s,
        max_requests=config.requests,
        warmup_s=config.warmup_s,
        cooldown_s=config.cooldown_s,
        **kind,  # type: ignore[arg-type]
    )


def _arrivals(config: LoadProbe, rate: float) -> Arrivals:
    return Arrivals(rate=rate, arrival=config.arrival, gamma_shape=config.gamma_shape)


def first_stages(config: LoadProbe) -> list[Stage]:
    """The stages that can be planned before anything ran (all of them but a sweep's
    rate stages)."""
    if config.profile == "synchronous":
        return [_stage(config, "synchronous", concurrency=1)]
    if config.profile == "concurrency":
        return [_stage(config, f"concurrency-{config.concurrency}", concurrency=config.concurrency)]
    if config.profile == "rate" and config.stages is not None:
        return listed_stages(config)
    if config.profile == "rate":
        assert config.rate is not None
        return [_stage(config, f"rate-{config.rate:g}", arrivals=_arrivals(config, config.rate))]
    if config.profile == "ramp":
        ramp = config.ramp
        arrivals = Arrivals(
            rate=ramp.start_rate,
            arrival=config.arrival,
            gamma_shape=config.gamma_shape,
            end_rate=ramp.end_rate,
        )
        return [_stage(config, f"ramp-{ramp.start_rate:g}-{ramp.end_rate:g}", arrivals=arrivals)]
    return [
        _stage(config, "synchronous", concurrency=1),
        _stage(config, "saturation", concurrency=config.sweep.max_concurrency),
    ]


def listed_stages(config: LoadProbe) -> list[Stage]:
    """``load.stages``: each its rate, its bounds (its own, else the load's), its name."""
    assert config.stages is not None
    out = []
    for listed in config.stages:
        duration, requests = listed.bounds(config.duration_s, config.requests, DEFAULT_DURATION_S)
        out.append(
            Stage(
                name=listed.label,
                arrivals=_arrivals(config, listed.rate),
                duration_s=duration,
                max_requests=requests,
                warmup_s=config.warmup_s,
                cooldown_s=config.cooldown_s,
            )
        )
    return out


def sweep_rates(synchronous_rate: float, saturation_rate: float, count: int) -> list[float]:
    """``count`` rates evenly spaced strictly between the two measured throughputs."""
    low, high = sorted((synchronous_rate, saturation_rate))
    step = (high - low) / (count + 1)
    return [low + step * (i + 1) for i in range(count)] if step > 0 else [low] * min(count, 1)


def rate_stages(config: LoadProbe, rates: list[float]) -> list[Stage]:
    """The open-loop stages of a sweep."""
    return [_stage(config, f"rate-{rate:.4g}", arrivals=_arrivals(config, rate)) for rate in rates]

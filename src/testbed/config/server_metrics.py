"""``server_metrics:`` of a load or A/B probe: scraping the server's Prometheus metrics.

While the probe sends traffic, a separate process scrapes each deployment's metrics endpoint
every ``interval_s`` seconds (its own process: parsing never delays the load generator's
event loop). The samples sit beside the records (``server_metrics.jsonl``); the summary
compares the server's token counters with the client's counts.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ServerMetrics(BaseModel):
    """When and how often to scrape, and how far the server's token counts may differ from
    the client's before the difference is flagged."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    enabled: bool = Field(
        True,
        description="Scrape the deployment's metrics endpoint during the probe (servers"
        " without one are noted, not failed).",
    )
    interval_s: float = Field(1.0, ge=0.05, le=60, description="Seconds between scrapes.")
    token_mismatch_threshold: float = Field(
        0.02,
        ge=0,
        le=1,
        description="Relative difference (fraction) between the server's token counters and"
        " the client's token counts above which the mismatch is flagged.",
    )

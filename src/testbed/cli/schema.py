"""``testbed schema``: the JSON Schema of the campaign format (for editors), with
``records`` of what a probe writes to records.jsonl, with ``summary`` of a run's
summary.json — each generated from its model."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "schema", help="print the JSON Schema of campaign files, records or run summaries"
    )
    parser.add_argument(
        "what",
        nargs="?",
        choices=("campaign", "records", "summary"),
        default="campaign",
        help="campaign (default): a campaign file; records: a line of records.jsonl;"
        " summary: a run's summary.json",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import json

    if args.what == "records":
        from testbed.results.records import record_schema

        print(json.dumps(record_schema(), indent=2))
        return 0
    if args.what == "summary":
        from testbed.results.run_summary import summary_schema

        print(json.dumps(summary_schema(), indent=2))
        return 0

    from testbed.config.campaign import Campaign

    schema = Campaign.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "testbed campaign"
    print(json.dumps(schema, indent=2))
    return 0

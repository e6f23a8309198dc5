"""``testbed schema``: the JSON Schema of the campaign format (for editors) or, with
``records``, of what a probe writes to records.jsonl — each generated from its model."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("schema", help="print the JSON Schema of campaign files or records")
    parser.add_argument(
        "what",
        nargs="?",
        choices=("campaign", "records"),
        default="campaign",
        help="campaign (default): a campaign file; records: a line of records.jsonl",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import json

    if args.what == "records":
        from testbed.results.records import record_schema

        print(json.dumps(record_schema(), indent=2))
        return 0

    from testbed.config.campaign import Campaign

    schema = Campaign.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "testbed campaign"
    print(json.dumps(schema, indent=2))
    return 0

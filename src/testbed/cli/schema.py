"""``testbed schema``: the JSON Schema of the campaign format, for editors."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("schema", help="print the JSON Schema of campaign files")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    import json

    from testbed.config.campaign import Campaign

    schema = Campaign.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "testbed campaign"
    print(json.dumps(schema, indent=2))
    del args
    return 0

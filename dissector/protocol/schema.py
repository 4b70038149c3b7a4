"""The protocol schema as data: API keys, versions and message layouts.

The data file is derived from Apache Kafka's message definitions by tools/gen_schema.py.
"""

import json
from functools import cache
from importlib import resources

MAX_VERSION = 32767


@cache
def schema():
    text = resources.files(__package__).joinpath("definitions/kafka_messages.json").read_text()
    return json.loads(text)


def in_range(version, rng):
    return rng is not None and rng[0] <= version <= rng[1]


@cache
def api_names():
    """api_key -> API name (Produce, Fetch, ...)."""
    return {int(k): v["name"] for k, v in schema()["apis"].items()}


def message(api_key, kind, version):
    """The definition of a request or response ('request'/'response') at a version, or None."""
    api = schema()["apis"].get(str(api_key))
    if api is None:
        return None
    for definition in api[kind]:
        if in_range(version, definition["validVersions"]):
            return definition
    return None


@cache
def version_range(api_key):
    """(lowest, highest) request version known for an API key, or None."""
    api = schema()["apis"].get(str(api_key))
    if api is None:
        return None
    ranges = [d["validVersions"] for d in api["request"]]
    return min(r[0] for r in ranges), max(r[1] for r in ranges)


def is_flexible(api_key, kind, version):
    definition = message(api_key, kind, version)
    if definition is None:
        # Versions beyond the schema: flexible if the newest known version is.
        rng = version_range(api_key)
        if rng is None or version < rng[0]:
            return False
        definition = message(api_key, kind, rng[1])
    return in_range(version, definition["flexibleVersions"])


def header(name):
    return schema()["headers"][name]


def data_schema(name):
    return schema()["data"][name]

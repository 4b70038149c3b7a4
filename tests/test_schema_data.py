"""The schema data shipped in the package is what tools/gen_schema.py makes of Kafka's files."""

import json
from pathlib import Path

import pytest

from dissector.protocol import schema
from tools import gen_schema

SOURCE = gen_schema.DEFAULT_SOURCE


@pytest.mark.skipif(not (SOURCE / "messages").is_dir(), reason="kafka-protocol definitions absent")
def test_shipped_schema_is_regenerated_from_the_definitions():
    shipped = json.loads(
        (Path(gen_schema.OUT_DIR) / "kafka_messages.json").read_text(encoding="utf-8")
    )
    assert gen_schema.build(SOURCE) == shipped


def test_every_api_key_from_0_to_92_with_its_known_ranges():
    names = schema.api_names()
    assert sorted(names) == list(range(93))
    assert (names[0], names[1], names[18], names[60], names[92]) == (
        "Produce",
        "Fetch",
        "ApiVersions",
        "DescribeCluster",
        "DeleteShareGroupOffsets",
    )
    assert schema.version_range(0) == (0, 13)
    assert schema.version_range(1) == (0, 18)
    assert schema.version_range(4) == (0, 7)  # LeaderAndIsr, removed in Kafka 4.0
    assert schema.is_flexible(0, "request", 9) and not schema.is_flexible(0, "request", 8)
    # AlterPartition v0-1 requests come from the older definition that still has TopicName.
    old = schema.message(56, "request", 1)
    new = schema.message(56, "request", 2)
    assert old is not new and old["validVersions"] == [0, 1]


def test_named_api_keys_match_the_schema():
    from dissector.protocol import apikeys

    names = schema.api_names()
    for constant, key in vars(apikeys).items():
        if constant.isupper() and isinstance(key, int):
            expected = "".join(w.capitalize() for w in constant.split("_"))
            assert names[key].lower() == expected.lower(), constant

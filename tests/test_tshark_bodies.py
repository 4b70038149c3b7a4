"""Every body value Wireshark's Kafka dissector (tshark) shows, compared with ours.

On every sample capture, every request and response at an API version the installed tshark
decodes: each value tshark shows, mapped to the Kafka field it stands for (`tshark_fields`),
against the decoded bodies, and the record and partition values against the `records` and
`partitions` tables. Where tshark is wrong the test says which known error it is
(`tshark_known`, each proven from the bytes) and checks our value against what the recording
script sent; any other disagreement fails.
"""

import functools
import itertools
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field

import pandas as pd
import pytest
import tshark_compare
import tshark_fields
import tshark_known
import tshark_oracle
import tshark_versions

import dissector

SAMPLES = tshark_oracle.SAMPLES

pytestmark = [
    pytest.mark.tshark,
    pytest.mark.skipif(not tshark_oracle.available(), reason="tshark is not installed"),
]


def release():
    version = tshark_oracle.tshark_version()
    if version not in tshark_versions.SUPPORTED:
        pytest.skip(f"no recorded API table for tshark {version}")
    return version


@dataclass
class Report:
    """One capture compared with tshark."""

    pdus: int = 0  # PDUs whose bodies were compared
    values: int = 0
    agreements: int = 0
    known: Counter = field(default_factory=Counter)  # known tshark error -> values it misreads
    misdisplayed: list = field(default_factory=list)  # (class, value): read right, shown wrong
    cases: list = field(default_factory=list)  # (class, exchange, side, frame)
    new: list = field(default_factory=list)  # disagreements no known error explains
    not_shown: list = field(default_factory=list)  # values tshark skipped, outside known errors
    unmapped: Counter = field(default_factory=Counter)
    unsupported: int = 0  # PDUs at versions tshark does not decode
    unpaired: int = 0  # responses tshark did not pair with their request
    flag_mismatch: list = field(default_factory=list)  # tshark's own flag vs the table
    truncated: list = field(default_factory=list)  # (pdu, exchange): ours malformed
    compared: list = field(default_factory=list)  # (pdu, exchange, side) compared


@functools.cache
def report(path):
    port = tshark_oracle.manifest(path)["broker_port"]
    version = release()
    exchanges = list(dissector.dissect(path, records="full"))
    by_request = {(e.request_frame, e.correlation_id): e for e in exchanges}
    by_response = {(e.response_frame, e.correlation_id): e for e in exchanges}
    r = Report()
    for pdu in tshark_oracle.kafka_pdus(path, port):
        side = "request" if pdu.dstport == port else "response"
        e = (by_request if side == "request" else by_response).get((pdu.frame, pdu.correlation_id))
        if e is None:
            continue  # raw SASL tokens and unpaired responses: test_tshark.py covers them
        body = e.request if side == "request" else e.response
        if isinstance(body, dict) and body.get("raw"):
            continue  # bare SASL tokens after SaslHandshake v0, which tshark reads as headers
        if pdu.api_key is None:
            r.unpaired += 1  # a response tshark did not match to its request: body undecoded
            continue
        supported = tshark_versions.supported(version, e.api_key, e.api_version)
        if supported == pdu.unsupported:
            r.flag_mismatch.append((pdu.frame, e.api_name, e.api_version, pdu.unsupported))
        if not supported:
            r.unsupported += 1
            continue
        if body is None:
            r.truncated.append((pdu, e))
            continue
        result = tshark_compare.compare(pdu, body, e.api_key, side)
        owners, starts = tshark_known.classify(
            pdu, body, e.api_key, e.api_version, side, result.differences
        )
        r.pdus += 1
        r.values += result.values
        r.agreements += result.agreements
        r.unmapped.update(result.unmapped)
        r.compared.append((pdu, e, side))
        for _, name in starts:
            r.cases.append((name, e, side, pdu.frame))
        r.misdisplayed += [(name, value) for name, _, value in tshark_known.misdisplayed(pdu)]
        for d, owner in zip(result.differences, owners, strict=True):
            if owner is None:
                r.new.append((pdu.frame, e.api_name, e.api_version, side, d))
            else:
                r.known[owner] += 1
        if result.not_shown and not starts:
            r.not_shown.append((pdu.frame, e.api_name, dict(result.not_shown)))
    return r


@pytest.fixture(scope="module", params=SAMPLES, ids=[p.stem for p in SAMPLES])
def sample(request):
    return request.param, report(request.param)


def test_every_body_value_tshark_shows_agrees_or_is_a_known_tshark_error(sample):
    path, r = sample
    shown = Counter(name for name, _ in r.misdisplayed)
    known = ", ".join(f"{n} {name}" for name, n in sorted((r.known + shown).items())) or "none"
    print(
        f"{path.name}: {r.pdus} PDUs, {r.values} values compared, {r.agreements} agree; "
        f"known tshark errors: {known}; {r.unsupported} PDUs at versions tshark does not "
        f"decode, {r.unpaired} responses tshark does not pair, {len(r.truncated)} cut short "
        "by the broker"
    )
    assert r.unmapped == Counter(), "tshark fields without a Kafka field in tshark_fields"
    assert r.new == [], "disagreements with tshark that no known tshark error explains"
    assert r.not_shown == [], "values tshark skips outside known tshark errors"
    assert r.values == r.agreements + sum(r.known.values())
    if r.pdus:
        assert r.agreements > 0.9 * r.values


def test_tshark_flags_exactly_the_versions_its_table_says_it_cannot_decode(sample):
    _, r = sample
    assert r.flag_mismatch == []


def test_the_recorded_table_is_the_one_tshark_prints():
    """tshark notes, on each API version an ApiVersions response lists, the range it decodes
    ("Unsupported Fetch version. Supports v0-11.") or that it does not know the key."""
    table = tshark_versions.SUPPORTED[release()]
    seen = 0
    for path in SAMPLES:
        for pdu in tshark_oracle.kafka_pdus(path, tshark_oracle.manifest(path)["broker_port"]):
            entries = {f.pos: int(f.show) for f in pdu.fields.get("kafka.api_versions.api_key", ())}
            notes = zip(
                pdu.fields.get("_ws.expert", ()),
                pdu.fields.get("_ws.expert.message", ()),
                strict=True,
            )
            for note, message in notes:
                key = entries.get(note.pos)
                if key is None:
                    continue
                seen += 1
                if message.show.startswith("Unknown"):
                    assert key not in table, message.show
                    continue
                low, high = re.search(r"Supports v(\d+)(?:-(\d+))?", message.show).groups()
                assert table[key] == (int(low), int(high or low)), message.show
    assert seen > 0


def test_every_mapped_name_is_a_field_of_the_installed_tshark():
    out = subprocess.run(["tshark", "-G", "fields"], capture_output=True, text=True).stdout
    fields = {line.split("\t")[2] for line in out.splitlines() if line.startswith("F\t")}
    mapped = set(tshark_fields.COMMON) | {n for api in tshark_fields.BY_API.values() for n in api}
    assert mapped - fields == set()


def test_truncated_responses_are_flagged_by_tshark_too(sample):
    """Tansu's cut-short responses (see the README): malformed here, malformed for tshark."""
    _, r = sample
    for pdu, e in r.truncated:
        assert e.status == "malformed" and "offset" in e.reason
        assert pdu.malformed, (pdu.frame, e.api_name)


def test_known_tshark_errors_are_proven_and_ours_match_what_was_sent():
    cases = [(path, case) for path in SAMPLES for case in report(path).cases]
    shown = [(path, case) for path in SAMPLES for case in report(path).misdisplayed]
    found = {name for _, (name, *_) in cases} | {name for _, (name, _) in shown}
    classes = {k.name for k in tshark_known.KNOWN} | set(tshark_known.MISDISPLAYED.values())
    assert found == classes, "a known error no capture shows"
    for path, (_, value) in shown:  # a batch's first or max timestamp: one of the records'
        assert value in {p["timestamp_ms"] for p in tshark_oracle.manifest(path)["produce"]}
    for path, (name, e, side, _frame) in cases:
        m = tshark_oracle.manifest(path)
        body = e.request if side == "request" else e.response
        if name == "int16-length group protocol bytes":
            group = m.get("consumer_group") or {}
            created = {t["name"]: t["partitions"] for t in m.get("topics_created", [])}
            for key, value in tshark_compare.flatten(body, e.api_key, side):
                if key in ("Metadata", "MemberMetadata") and isinstance(value, dict):
                    assert set(value["Topics"]) == set(group.get("topics") or created)
                elif key in ("Assignment", "MemberAssignment") and isinstance(value, dict):
                    assigned = {
                        f"{t['Topic']}/{p}"
                        for t in value["AssignedPartitions"]
                        for p in t["Partitions"]
                    }
                    every = {f"{t}/{p}" for t, n in created.items() for p in range(n)}
                    assert assigned <= set(group.get("assignment") or every)
        elif name == "magic 0 key one byte late":
            messages = [
                (v, w)
                for (k, v), (k2, w) in itertools.pairwise(
                    tshark_compare.flatten(body, e.api_key, side)
                )
                if k == "Message.key" and k2 == "Message.value"
            ]
            sent = [(p["key"]["text"].encode(), p["value"]["text"].encode()) for p in m["produce"]]
            assert messages == sent


def test_records_and_partitions_tables_agree_with_tshark(sample):
    """tshark's record keys, values, offsets and timestamps against the `records` table,
    and its partition-level offsets against the `partitions` table."""
    path, r = sample
    records = dissector.read_pcap(path, table="records")
    partitions = dissector.read_pcap(path, table="partitions")
    compared = 0
    for pdu, e, side in r.compared:
        if any(case[3] == pdu.frame for case in r.cases):
            continue  # tshark's misreads are counted above
        f = pdu.fields
        keys = f.get("kafka.message_key", ())
        if keys and f.get("kafka.batch_crc"):
            rows = records[(records.frame == pdu.frame) & (records.direction == side)]
            rows = rows[rows.correlation_id == e.correlation_id]
            theirs = [
                (
                    tshark_compare.tshark_value("bytes", k),
                    tshark_compare.tshark_value("bytes", v),
                )
                for k, v in zip(keys, f.get("kafka.message_value", ()), strict=True)
            ]
            keys = rows.key.to_numpy(dtype=object, na_value=None)
            values = rows.value.to_numpy(dtype=object, na_value=None)
            assert list(zip(keys, values, strict=True)) == theirs
            stamps = [
                tshark_compare.tshark_value("date_ms", t) for t in f["kafka.message_timestamp"]
            ]
            assert [pd.Timestamp(t).value // 10**6 for t in rows.timestamp] == stamps
            body = e.request if side == "request" else e.response
            offsets = tshark_compare.values_for(pdu, body, e.api_key, side, "Record.offset")
            if side == "response":
                assert list(rows.offset) == offsets
            # Records sent carry, in the table, the offsets the broker assigned them; tshark
            # shows the client's placeholders, compared above through the decoded body.
            headers = list(
                zip(
                    [
                        tshark_compare.tshark_value("string", h)
                        for h in f.get("kafka.header_key", ())
                    ],
                    [
                        tshark_compare.tshark_value("bytes", h)
                        for h in f.get("kafka.header_value", ())
                    ],
                    strict=True,
                )
            )
            assert [_header(h) for hs in rows.headers for h in hs] == headers
            compared += 3 * len(theirs) + len(offsets) + len(headers)
        rows = partitions[partitions.request_frame == e.request_frame]
        rows = rows[rows.correlation_id == e.correlation_id]
        body = e.request if side == "request" else e.response
        for column, kafka in TABLE_COLUMNS.get((e.api_key, side), ()):
            theirs = tshark_compare.values_for(pdu, body, e.api_key, side, kafka)
            assert sorted(rows[column].dropna().astype(int)) == sorted(theirs), (column, pdu.frame)
            compared += len(theirs)
    print(f"{path.name}: {compared} table values compared with tshark")


def _header(h):
    """A `records` table header as (key, value): a struct, or a pair."""
    return (h["key"], h["value"]) if isinstance(h, dict) else tuple(h)


# (API key, side) -> (partitions column, the Kafka field tshark shows for it)
TABLE_COLUMNS = {
    (0, "response"): (("base_offset", "BaseOffset"),),
    (1, "request"): (("fetch_offset", "FetchOffset"),),
    (1, "response"): (
        ("high_watermark", "HighWatermark"),
        ("last_stable_offset", "LastStableOffset"),
        ("log_start_offset", "LogStartOffset"),
    ),
    (2, "response"): (("offset", "Offset"),),
    (8, "request"): (("committed_offset", "CommittedOffset"),),
    (9, "response"): (("committed_offset", "CommittedOffset"),),
}

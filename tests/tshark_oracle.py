"""Wireshark's Kafka dissector as an oracle, through pyshark: the Kafka PDUs tshark finds.

pyshark reads tshark's output once per capture and gives each Kafka PDU of a packet its own
layer, so several PDUs in one packet stay apart. Each PDU keeps every field tshark shows, by
field name in the order tshark shows them, and the PDU's bytes, so a test can prove tshark
wrong. A capture is parsed once per test session (pyshark costs milliseconds a packet).
"""

import functools
import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from pyshark.tshark.output_parser.tshark_xml import packet_from_xml_packet
from samples import client_captures

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
# The captures recorded from a broker, compared with tshark; the 0.7 ones are built from the
# seed documents and have their own tests (tshark reads 0.7 requests as if they were 0.8 ones).
SAMPLES = sorted(
    p
    for p in client_captures()
    if p.with_suffix(".expected.json").exists() and not p.name.startswith("legacy-")
)


def manifest(path):
    """What the recording scenario of a sample capture knows it sent."""
    return json.loads(path.with_suffix(".expected.json").read_text())


# Fields of the header and the ones tshark computes (request/response matching, expert info):
# not values read from the body.
HEADER = frozenset(
    {
        "kafka.len",
        "kafka.api_key",
        "kafka.api_version",
        "kafka.request_key",
        "kafka.response_key",
        "kafka.request.version",
        "kafka.response.version",
        "kafka.correlation_id",
        "kafka.client_id",
        "kafka.request_frame",
        "kafka.response_frame",
    }
)
EXPERT = frozenset(
    {
        "kafka.request_missing",
        "kafka.unknown_api_key",
        "kafka.unsupported_api_version",
        "kafka.pdu_length_mismatch",
        "kafka.bad_array_length",
        "kafka.bad_string_length",
        "kafka.bad_bytes_length",
        "kafka.bad_record_length",
        "kafka.bad_varint",
        "kafka.bad_message_set_length",
        "kafka.unknown_message_magic",
    }
)


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    show: str  # tshark's displayed value
    raw: str  # hex of the bytes tshark read for it ("" for computed fields)
    showname: str
    pos: int
    size: int


@dataclass
class Pdu:
    frame: int
    srcport: int
    dstport: int
    length: int
    correlation_id: int | None
    api_key: int | None
    api_version: int | None
    client_id: str | None
    request_frame: int | None  # on responses: the request tshark matched it to
    unsupported: bool  # tshark does not know this API key or version (body undecoded)
    malformed: bool  # tshark reported the packet malformed after this PDU's start
    fields: dict = field(default_factory=dict)  # name -> [Field], in tshark's order
    experts: tuple = ()  # names of tshark's expert notes on this PDU
    raw: bytes | None = None  # the PDU, size prefix included, when tshark shows its bytes

    def body_fields(self):
        """Fields read from the body: name -> [Field], header and expert notes left out."""
        body = {
            name: values
            for name, values in self.fields.items()
            if name.startswith("kafka.") and name not in HEADER and name not in EXPERT
        }
        # client ids in bodies (DescribeGroups members) are body fields; the header's is not
        clients = [
            f
            for f in self.fields.get("kafka.client_id", ())
            if self.client_id is None or f is not self.fields["kafka.client_id"][0]
        ]
        if clients:
            body["kafka.client_id"] = clients
        return body


def available():
    return shutil.which("tshark") is not None


@functools.cache
def tshark_version():
    """The installed tshark's major.minor, e.g. "4.0"."""
    out = subprocess.run(["tshark", "--version"], capture_output=True, text=True).stdout
    match = re.search(r"TShark \(Wireshark\) (\d+)\.(\d+)", out)
    return f"{match[1]}.{match[2]}" if match else None


@functools.lru_cache(maxsize=16)  # a capture's PDUs take a few MB; damage tests read dozens
def kafka_pdus(path, port):
    """Every Kafka PDU tshark finds in a capture, the port decoded as Kafka (cached).

    tshark runs as a plain child process and pyshark turns each packet of its PDML into
    layers and fields: pyshark's FileCapture waits for tshark through asyncio's child
    watchers, which lose the child when captures are read from several threads at once (as
    the damaged-capture comparison does)."""
    out = subprocess.run(
        ["tshark", "-n", "-r", str(path), "-d", f"tcp.port=={port},kafka", "-Y", "kafka"]
        + ["-T", "pdml"],
        capture_output=True,
        check=True,
        timeout=300,
    ).stdout
    pdus = []
    for match in PACKET.finditer(out):
        pdus.extend(_packet_pdus(packet_from_xml_packet(match.group())))
    return tuple(pdus)


PACKET = re.compile(rb"<packet>.*?</packet>", re.DOTALL)


def _packet_pdus(packet):
    frame = int(packet.number)
    tcp = packet.tcp
    srcport, dstport = int(tcp.srcport), int(tcp.dstport)
    spans = _byte_spans(packet)
    pdus = []
    for layer in packet.layers:
        if layer.layer_name == "kafka":
            pdus.append(_pdu(layer, frame, srcport, dstport, spans))
        elif layer.layer_name == "_ws.malformed" and pdus:
            pdus[-1].malformed = True  # tshark gave up inside the PDU before this marker
    return pdus


def _byte_spans(packet):
    """(frame offset, bytes) of the TCP payload, and of a reassembled PDU when there is one."""
    spans = []
    tcp_payload = packet.tcp.get_field("tcp.payload")
    if tcp_payload is not None:
        spans.append((int(tcp_payload.pos), bytes.fromhex(tcp_payload.raw_value)))
    for layer in packet.layers:
        reassembled = layer.get_field("tcp.reassembled.data")
        if reassembled is not None:
            spans.append((0, bytes.fromhex(reassembled.raw_value)))
    return spans


def _fields(layer):
    # pyshark keeps every field of a layer by name, in document order, only in _all_fields
    fields = {}
    for name, container in layer._all_fields.items():
        fields[name] = [
            Field(
                name=name,
                show=f.show if f.show is not None else "",
                raw=f.raw_value or "",
                showname=f.showname or "",
                pos=int(f.pos or 0),
                size=int(f.size or 0),
            )
            for f in container.all_fields
        ]
    return fields


def _pdu(layer, frame, srcport, dstport, spans):
    fields = _fields(layer)

    def first(name, kind=int):
        values = fields.get(name)
        return kind(values[0].show) if values else None

    length = first("kafka.len")
    experts = tuple(name for name in fields if name in EXPERT)
    raw = None
    start = fields["kafka.len"][0].pos if "kafka.len" in fields else None
    for offset, data in spans:
        begin = start - offset if start is not None else -1
        if begin >= 0 and begin + 4 + (length or 0) <= len(data):
            candidate = data[begin : begin + 4 + length]
            if int.from_bytes(candidate[:4], "big") == length:
                raw = candidate
                break
    return Pdu(
        frame=frame,
        srcport=srcport,
        dstport=dstport,
        length=length,
        correlation_id=first("kafka.correlation_id"),
        api_key=first("kafka.api_key"),
        api_version=first("kafka.api_version") if "kafka.api_version" in fields else None,
        client_id=_header_client_id(fields),
        request_frame=first("kafka.request_frame"),
        unsupported=_unsupported(fields),
        malformed=False,
        fields=fields,
        experts=experts,
        raw=raw,
    )


def _header_client_id(fields):
    """The request header's client id: the one right after the correlation id (responses have
    none in their header, but DescribeGroups responses name clients in the body)."""
    ids, correlation = fields.get("kafka.client_id"), fields.get("kafka.correlation_id")
    if ids and correlation and ids[0].pos == correlation[0].pos + 4:
        return ids[0].show
    return None


def _unsupported(fields):
    """Whether tshark flags this PDU's API key or version as one it does not know. The note sits
    on the header; ApiVersions responses also carry such notes on the versions they list."""
    header = fields.get("kafka.correlation_id") or fields.get("kafka.len") or ()
    if not header:
        return False
    header_end = header[0].pos + header[0].size
    notes = zip(fields.get("_ws.expert", ()), fields.get("_ws.expert.message", ()), strict=True)
    return any(
        note.pos < header_end and re.match(r"Unknown .* API key|Unsupported .* version", m.show)
        for note, m in notes
    )


@dataclass
class RecordFields:
    """The record-batch fields tshark shows in one Kafka PDU, in wire order."""

    frame: int
    correlation_id: int | None
    crcs: list
    codecs: list
    last_offset_deltas: list
    first_timestamps: list  # raw int64 (tshark 4.0 prints these dates wrongly)
    producer_ids: list
    base_sequences: list
    keys: list  # bytes, None for a null key
    values: list  # bytes, None for a null value
    malformed: bool


def record_fields(path, port):
    result = []
    for p in kafka_pdus(path, port):
        f = p.fields

        def ints(name, fields=f):
            return [int(v.show) for v in fields.get(name, ())]

        def blobs(name, fields=f):
            return [
                None if "<NULL>" in v.showname else bytes.fromhex(v.raw)
                for v in fields.get(name, ())
            ]

        result.append(
            RecordFields(
                frame=p.frame,
                correlation_id=p.correlation_id,
                crcs=[int(v.raw, 16) for v in f.get("kafka.batch_crc", ())],
                codecs=ints("kafka.batch_codec"),
                last_offset_deltas=ints("kafka.batch_last_offset_delta"),
                first_timestamps=[int(v.raw, 16) for v in f.get("kafka.batch_first_timestamp", ())],
                producer_ids=[int(v.show) for v in f.get("kafka.producer_id", ()) if v.size == 8],
                base_sequences=ints("kafka.batch_base_sequence"),
                keys=blobs("kafka.message_key"),
                values=blobs("kafka.message_value"),
                malformed=p.malformed,
            )
        )
    return result

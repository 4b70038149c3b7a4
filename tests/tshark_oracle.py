"""Wireshark's Kafka dissector as an oracle: the Kafka PDUs tshark finds in a capture.

tshark's PDML output has one <proto name="kafka"> element per PDU, so several PDUs in one
packet stay apart. Only header facts are taken: they are what tshark gets right for every
version; its body decoding stops at the versions it knows (Debian's 4.0 build: Produce v8,
Fetch v11, Metadata v9, ...), which it flags as "unsupported".
"""

import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass


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
    malformed: bool


def available():
    return shutil.which("tshark") is not None


def _packets(path, port):
    """tshark's PDML packets of a capture that carry Kafka, port decoded as Kafka."""
    out = subprocess.run(
        ["tshark", "-r", str(path), "-d", f"tcp.port=={port},kafka", "-T", "pdml", "-Y", "kafka"],
        capture_output=True,
        check=True,
        timeout=300,
    ).stdout
    return ET.fromstring(out).iter("packet")


def kafka_pdus(path, port):
    pdus = []
    for packet in _packets(path, port):
        frame = srcport = dstport = None
        for field in packet.iter("field"):
            name = field.get("name")
            if name == "frame.number":
                frame = int(field.get("show"))
            elif name == "tcp.srcport" and srcport is None:
                srcport = int(field.get("show"))
            elif name == "tcp.dstport" and dstport is None:
                dstport = int(field.get("show"))
        for proto in packet.findall("proto"):
            if proto.get("name") == "kafka":
                pdus.append(_pdu(proto, frame, srcport, dstport))
            elif proto.get("name") == "_ws.malformed" and pdus and pdus[-1].frame == frame:
                pdus[-1].malformed = True  # tshark gave up inside the PDU before this marker
    return pdus


def _pdu(proto, frame, srcport, dstport):
    values = {}
    for field in proto.findall("field"):  # header fields are direct children
        values.setdefault(field.get("name"), field.get("show"))
    version_field = next(
        (f for f in proto.findall("field") if f.get("name") == "kafka.api_version"), None
    )
    unsupported = "kafka.unknown_api_key" in {f.get("name") for f in proto.findall("field")}
    if version_field is not None:
        unsupported |= any(
            f.get("name") == "kafka.unsupported_api_version" for f in version_field.iter("field")
        )

    def number(name):
        v = values.get(name)
        return None if v is None else int(v)

    return Pdu(
        frame=frame,
        srcport=srcport,
        dstport=dstport,
        length=number("kafka.len"),
        correlation_id=number("kafka.correlation_id"),
        api_key=number("kafka.api_key"),
        api_version=number("kafka.api_version"),
        client_id=values.get("kafka.client_id"),
        request_frame=number("kafka.request_frame"),
        unsupported=unsupported,
        malformed=False,
    )


@dataclass
class RecordFields:
    """The record-batch fields tshark shows in one Kafka PDU, in wire order."""

    frame: int
    crcs: list
    codecs: list
    last_offset_deltas: list
    first_timestamps: list  # raw int64 (tshark 4.0 prints these dates wrongly)
    producer_ids: list
    base_sequences: list
    keys: list  # bytes
    values: list  # bytes
    malformed: bool


def record_fields(path, port):
    result = []
    for packet in _packets(path, port):
        frame = next(
            int(f.get("show")) for f in packet.iter("field") if f.get("name") == "frame.number"
        )
        for proto in packet.findall("proto"):
            if proto.get("name") == "_ws.malformed" and result and result[-1].frame == frame:
                result[-1].malformed = True
            if proto.get("name") != "kafka":
                continue
            r = RecordFields(frame, [], [], [], [], [], [], [], [], False)
            for f in proto.iter("field"):
                name, raw = f.get("name"), f.get("value") or ""
                if name == "kafka.batch_crc":
                    r.crcs.append(int(raw, 16))
                elif name == "kafka.batch_codec":
                    r.codecs.append(int(f.get("show")))
                elif name == "kafka.batch_last_offset_delta":
                    r.last_offset_deltas.append(int(f.get("show")))
                elif name == "kafka.batch_first_timestamp":
                    r.first_timestamps.append(int(raw, 16))
                elif name == "kafka.producer_id" and len(raw) == 16:
                    r.producer_ids.append(int(f.get("show")))
                elif name == "kafka.batch_base_sequence":
                    r.base_sequences.append(int(f.get("show")))
                elif name in ("kafka.message_key", "kafka.message_value"):
                    null = "<NULL>" in (f.get("showname") or "")
                    value = None if null else bytes.fromhex(raw)
                    (r.keys if name == "kafka.message_key" else r.values).append(value)
            result.append(r)
    return result

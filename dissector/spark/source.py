"""The Spark 4 Python data source behind `kafka_pcap` for split captures.

`kafka_pcap_packets`: the TCP packets of captures split into byte ranges. Each input partition
is a list of pieces (byte ranges of captures, planned by `plan.py`, small ones packed together
up to about `split_bytes`); a task yields the packets of its pieces as Arrow record batches,
with Wireshark's frame numbers and each packet's shuffle key. Without the `pieces` option it
plans the paths itself, in the planning process.
"""

import json

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from .tasks import PACKETS, piece_packets

NAME = "kafka_pcap_packets"
MIN_TASK_BYTES = 4 << 20


class PiecesPartition(InputPartition):
    def __init__(self, pieces):
        super().__init__(pieces)
        self.pieces = pieces  # [(capture, Piece as a dict)]


class PacketReader(DataSourceReader):
    def __init__(self, options):
        self.options = options

    def partitions(self):
        from .plan import pack, plan_locally

        if "pieces" in self.options:
            pieces = json.loads(self.options["pieces"])
        else:
            paths = json.loads(self.options.get("paths") or "[]")
            if "path" in self.options:
                paths.append(self.options["path"])
            pieces = plan_locally(paths, parse_size(self.options.get("split_bytes", "128m")))
        return [PiecesPartition(group) for group in pack(pieces, self._split())]

    def _split(self):
        # Tiny ranges are read one after another in one task: a task costs more than a few
        # MiB of packets.
        return max(parse_size(self.options.get("split_bytes", "128m")), MIN_TASK_BYTES)

    def read(self, partition):
        from ..capture.ranges import Piece

        for capture, piece in partition.pieces:
            piece = Piece(**{**piece, "prefix": bytes.fromhex(piece["prefix"])})
            yield from piece_packets(piece, capture)


class PacketSource(DataSource):
    @classmethod
    def name(cls):
        return NAME

    def schema(self):
        from .types import spark_schema

        return spark_schema(PACKETS)

    def reader(self, schema):
        return PacketReader(self.options)


UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(text):
    """ "128m", "1g", "65536" -> bytes."""
    text = str(text).strip().lower().removesuffix("b")
    if text and text[-1] in UNITS:
        return int(float(text[:-1]) * UNITS[text[-1]])
    return int(text)

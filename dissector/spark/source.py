"""The two Spark 4 Python data sources behind `kafka_pcap`.

`kafka_pcap_packets`: the TCP packets of captures split into byte ranges. Each input partition
is a list of pieces (byte ranges of captures, planned by `plan.py`, small ones packed together
up to about `split_bytes`); a task yields the packets of its pieces as Arrow record batches,
with Wireshark's frame numbers and each packet's shuffle key. Without the `pieces` option it
plans the paths itself, in the planning process.

`kafka_pcap_whole`: the rows of one table of captures read whole (see whole.py), one capture
per task (small ones packed together), largest first; with the table `notes`, one row of
summary, counts and warnings per capture instead.
"""

import json

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from .tasks import PACKETS, piece_packets

NAME = "kafka_pcap_packets"
WHOLE_NAME = "kafka_pcap_whole"
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
            pieces = plan_locally(paths, _bytes(self.options.get("split_bytes", "128m")))
        return [PiecesPartition(group) for group in pack(pieces, self._split())]

    def _split(self):
        # Tiny ranges are read one after another in one task: a task costs more than a few
        # MiB of packets.
        return max(_bytes(self.options.get("split_bytes", "128m")), MIN_TASK_BYTES)

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


class CapturesPartition(InputPartition):
    def __init__(self, captures):
        super().__init__(captures)
        self.captures = captures


class WholeReader(DataSourceReader):
    def __init__(self, options, schema):
        self.options = options
        self.schema = schema

    def partitions(self):
        from .plan import pack_whole

        captures = json.loads(self.options["captures"])
        return [CapturesPartition(group) for group in pack_whole(captures, MIN_TASK_BYTES)]

    def read(self, partition):
        from .types import table_schema
        from .whole import notes_batches, table_batches

        table = self.options.get("table", "pairs")
        options = json.loads(self.options.get("dissect") or "{}")
        for capture in partition.captures:
            if table == "notes":
                yield from notes_batches(capture, options)
            else:
                schema = table_schema(table, self.options.get("timestamps", "us"))
                yield from table_batches(capture, table, options, schema)


class WholeSource(DataSource):
    """Options: `captures` (JSON list of files), `table` (a table, or "notes"), `dissect`
    (JSON of the dissection options), `timestamps` ("us" or "ns", see types.py)."""

    @classmethod
    def name(cls):
        return WHOLE_NAME

    def schema(self):
        from .types import spark_schema, table_schema
        from .whole import NOTES

        table = self.options.get("table", "pairs")
        if table == "notes":
            return spark_schema(NOTES)
        return spark_schema(table_schema(table, self.options.get("timestamps", "us")))

    def reader(self, schema):
        return WholeReader(self.options, schema)


UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def _bytes(text):
    """ "128m", "1g", "65536" -> bytes."""
    text = str(text).strip().lower().removesuffix("b")
    if text and text[-1] in UNITS:
        return int(float(text[:-1]) * UNITS[text[-1]])
    return int(text)

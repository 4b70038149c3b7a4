"""The raw packets of a live run kept in a ring of pcap files: `ring-0001.pcap`, ... in one
directory; past `files` of them, the oldest is deleted. Each file is a complete capture
(nanosecond pcap) that `analyze` reads, so the packets behind a surprising row can be looked
at again, in tshark too.
"""

import struct
from pathlib import Path

from ..capture import pcap

SNAPLEN = 262144


class PcapRing:
    def __init__(self, directory, files=10, file_bytes=100_000_000):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.files = max(1, files)
        self.file_bytes = file_bytes
        self.written = []  # paths kept, oldest first
        self._count = 0
        self._out = None
        self._size = 0
        self._linktype = None

    def write(self, packet):
        if self._out is None or self._size >= self.file_bytes or packet.linktype != self._linktype:
            self._next(packet.linktype)
        sec, ns = divmod(packet.ts, 1_000_000_000)
        data = packet.data
        self._out.write(struct.pack("<IIII", sec, ns, len(data), packet.wirelen) + data)
        self._size += 16 + len(data)

    def _next(self, linktype):
        self.close()
        self._count += 1
        path = self.directory / f"ring-{self._count:04d}.pcap"
        self._out = path.open("wb")
        header = struct.pack("<IHHiIII", pcap.MAGIC_NSEC, 2, 4, 0, 0, SNAPLEN, linktype)
        self._out.write(header)
        self._size = len(header)
        self._linktype = linktype
        self.written.append(path)
        while len(self.written) > self.files:
            self.written.pop(0).unlink(missing_ok=True)

    def close(self):
        if self._out is not None:
            self._out.close()
            self._out = None

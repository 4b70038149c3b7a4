"""The summary of a capture, accumulated exchange by exchange (no table is held), as text.

Per API and version: requests, latency percentiles, the time requests queued behind earlier
ones on their connection, errors by name, unanswered requests; exchanges per status; Produce
and Fetch volume per topic and per codec. Summaries of parts of a capture (Spark tasks) merge.
"""

import math
from array import array
from collections import Counter, defaultdict
from functools import partial

from ..protocol.apikeys import FETCH, PRODUCE
from ..protocol.records.census import census, measure
from ..session.exchange import STATUSES, UNANSWERED
from ..session.modern import scanned
from .partitions import exchange_partitions

QUANTILES = (("p50_ms", 0.5), ("p95_ms", 0.95), ("p99_ms", 0.99))
VOLUME = ("batches", "records", "control_records", "bytes", "uncompressed_bytes")
CODEC = ("bytes", "uncompressed_bytes")  # of one codec's batches


def quantile(values, q):
    """Linear interpolation between closest ranks, as pandas' default."""
    if not values:
        return float("nan")
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


class Distribution:
    """Values of one measure: kept exactly while there are few (percentiles then equal
    pandas'), then as counts in buckets a factor GROWTH wide (within 1% of the true value),
    so that a live run of days keeps a bounded summary."""

    EXACT = 100_000
    GROWTH = 1.02
    _LOG = math.log(GROWTH)
    __slots__ = ("values", "buckets", "count", "max")

    def __init__(self):
        self.values = array("d")
        self.buckets = None  # bucket -> count, once past EXACT; bucket None: values <= 0
        self.count = 0
        self.max = float("nan")

    def add(self, x):
        self.count += 1
        if not x <= self.max:
            self.max = x
        if self.buckets is None:
            self.values.append(x)
            if len(self.values) > self.EXACT:
                self._bucketed()
        else:
            k = self._bucket(x)
            self.buckets[k] = self.buckets.get(k, 0) + 1

    def _bucket(self, x):
        return None if x <= 0 else math.floor(math.log(x) / self._LOG)

    def _bucketed(self):
        self.buckets = Counter(self._bucket(x) for x in self.values)
        self.values = array("d")

    def quantile(self, q):
        if self.buckets is None:
            return quantile(self.values, q)
        rank = q * (self.count - 1)
        seen = 0
        for k in sorted(self.buckets, key=lambda k: -math.inf if k is None else k):
            seen += self.buckets[k]
            if seen > rank:
                return 0.0 if k is None else self.GROWTH ** (k + 0.5)
        return self.max

    def merge(self, other):
        self.count += other.count
        if not other.max <= self.max:
            self.max = other.max
        if self.buckets is None and other.buckets is None:
            self.values.extend(other.values)
            if len(self.values) > self.EXACT:
                self._bucketed()
            return
        if self.buckets is None:
            self._bucketed()
        self.buckets.update(other.buckets or Counter(other._bucket(x) for x in other.values))


class _Sums:
    """Sums of a few counts over record sets, and for each how many sets left it unknown
    (None): a sum with an unknown part is unknown."""

    __slots__ = ("sums", "unknown")

    def __init__(self, size):
        self.sums = [0] * size
        self.unknown = [0] * size

    def add(self, values):
        sums, unknown = self.sums, self.unknown
        for i in range(len(values)):
            value = values[i]
            if value is None:
                unknown[i] += 1
            else:
                sums[i] += value

    def merge(self, other):
        for i in range(len(self.sums)):
            self.sums[i] += other.sums[i]
            self.unknown[i] += other.unknown[i]

    def row(self, names):
        return {name: None if self.unknown[i] else self.sums[i] for i, name in enumerate(names)}


def _with_ratio(row):
    """A volume row with its compression ratio, uncompressed over compressed bytes."""
    raw, size = row["uncompressed_bytes"], row["bytes"]
    row["ratio"] = raw / size if raw is not None and size else None
    return row


class _Api:
    __slots__ = ("requests", "latency", "queue", "errors", "unanswered")

    def __init__(self):
        self.requests = 0
        self.latency = Distribution()
        self.queue = Distribution()
        self.errors = Counter()
        self.unanswered = 0

    def merge(self, other):
        self.requests += other.requests
        self.latency.merge(other.latency)
        self.queue.merge(other.queue)
        self.errors.update(other.errors)
        self.unanswered += other.unanswered


class Summary:
    """Feed exchanges with add(); read rows with apis(), volume(), or the whole as text().

    Volume comes from a census of the record sets the session found (no decoding); with
    decompress, each compressed batch is decompressed to measure it (census.measure), and
    bodies the session did not only scan are read decoded.
    """

    def __init__(self, decompress=False):
        self.decompress = decompress
        self._apis = defaultdict(_Api)
        self.statuses = Counter()
        self._volume = defaultdict(partial(_Sums, len(VOLUME)))  # (api, topic) -> sums of VOLUME
        self._codecs = defaultdict(partial(_Sums, len(CODEC)))  # (api, codec) -> sums of CODEC

    @classmethod
    def of(cls, options):
        """The summary of a dissection with these Options: uncompressed sizes when asked for
        (--decompress). The records table and `--records full` decompress what they show,
        not the summary's volume: that would decode every body a second time."""
        return cls(decompress=options.decompress)

    def add(self, e):
        self.statuses[e.status] += 1
        if e.request_frame is not None:
            api = self._apis[(e.api_name, e.api_version)]
            api.requests += 1
            if e.latency_ms is not None:
                api.latency.add(e.latency_ms)
            if e.queue_ms is not None:
                api.queue.add(e.queue_ms)
            if e.error_code:
                api.errors[e.error_name] += 1
            if e.status == UNANSWERED:
                api.unanswered += 1
        if e.api_key in (PRODUCE, FETCH) and e.protocol == "0.8+":
            if e.record_sets is None:
                self._add_decoded_volume(e)
            elif not self.decompress:
                self._add_census(e)
            elif not self._add_measured(e):
                self._add_decoded_volume(e)

    def _add_census(self, e):
        """Volume counted from the record sets' headers, as the session found them (2.5 record
        sets an exchange on real traffic): a compressed set's uncompressed size is unknown."""
        _, data, sets = e.record_sets
        api, names = e.api_name, e.topic_names
        for topic, _, start, end in sets:
            if end > start:
                batches, records, control, codecs = census(data, start, end)
                size = end - start
                values = (batches, records, control, size, None if codecs else size)
                self._volume[(api, names.get(topic, topic))].add(values)
                if codecs:  # compressed bytes, their uncompressed size unknown
                    for codec, n in codecs.items():
                        self._codecs[(api, codec)].add((n, None))

    def _add_measured(self, e):
        """Volume with uncompressed sizes, each compressed batch decompressed within the
        body's allowance as decoding it would (the same figures, no dict made); False, with
        nothing added, where the body is not only scanned or holds magic 0/1 messages."""
        side, data, sets = e.record_sets
        body = e._request if side == "request" else e._response
        if not scanned(body) or body[-1] is None:
            return False
        limits = body[-1].limits
        allowance = body[-1].allowance()  # the body's record sets share one
        data = data if data.__class__ is bytes else bytes(data)
        found = []
        for topic, _, start, end in sets:
            if end > start:
                measured = measure(data, start, end, limits, allowance)
                if measured is None:
                    return False
                found.append((topic, end - start, measured))
        api, names = e.api_name, e.topic_names
        for topic, size, (batches, records, control, raw, codecs) in found:
            name = names.get(topic, topic) if topic else None  # no name: as decoded
            self._volume[(api, name)].add((batches, records, control, size, raw))
            for codec, sizes in codecs.items():
                self._codecs[(api, codec)].add(sizes)
        return True

    def _add_decoded_volume(self, e):
        """Volume from the decoded bodies (the partitions table's rows): their `codecs` map
        each codec to (compressed bytes, uncompressed bytes or None)."""
        for row in exchange_partitions(e):
            if row.get("bytes"):
                values = tuple(row.get(name) for name in VOLUME)
                self._volume[(e.api_name, row["topic"])].add(values)
                for codec, sizes in (row.get("codecs") or {}).items():
                    self._codecs[(e.api_name, codec)].add(sizes)

    def merge(self, other):
        """Add the summary of another part of the same capture (a Spark task's)."""
        self.statuses.update(other.statuses)
        for key, api in other._apis.items():
            self._apis[key].merge(api)
        for key, sums in other._volume.items():
            self._volume[key].merge(sums)
        for key, sums in other._codecs.items():
            self._codecs[key].merge(sums)

    def rename_topics(self, names):
        """Count the volume of topics named otherwise under the names `names` gives them."""
        for api, topic in [key for key in self._volume if key[1] in names]:
            self._volume[(api, names[topic])].merge(self._volume.pop((api, topic)))

    def apis(self):
        """One dict per (api_name, api_version), in name and version order."""
        rows = []
        for (name, version), api in sorted(self._apis.items(), key=_api_order):
            row = {"api_name": name, "api_version": version, "requests": api.requests}
            for column, q in QUANTILES:
                row[column] = api.latency.quantile(q)
            row["max_ms"] = api.latency.max
            row["queue_p95_ms"] = api.queue.quantile(0.95)
            row["errors"] = dict(api.errors.most_common())
            row["unanswered"] = api.unanswered
            rows.append(row)
        return rows

    def volume(self):
        rows = []
        for (api, topic), sums in sorted(self._volume.items(), key=lambda kv: str(kv[0])):
            rows.append(_with_ratio({"api_name": api, "topic": topic, **sums.row(VOLUME)}))
        return rows

    def codecs(self):
        rows = []
        for (api, codec), sums in sorted(self._codecs.items()):
            rows.append(_with_ratio({"api_name": api, "codec": codec, **sums.row(CODEC)}))
        return rows

    def text(self, title=""):
        lines = [title] if title else []
        apis = self.apis()
        if not apis:
            lines.append("no Kafka exchanges found")
        else:
            lines.append(
                f"{'api':<28} {'ver':>3} {'requests':>8} {'p50 ms':>9} {'p95 ms':>9} "
                f"{'p99 ms':>9} {'max ms':>9} {'queued p95':>10} {'unanswered':>10}  errors"
            )
            for r in apis:
                name = r["api_name"] if isinstance(r["api_name"], str) else "unknown"
                version = "?" if r["api_version"] is None else str(r["api_version"])
                errors = ", ".join(f"{k} x{v}" for k, v in r["errors"].items()) or "-"
                cells = " ".join(
                    f"{r[c]:9.2f}" if r[c] == r[c] else f"{'-':>9}"
                    for c in ("p50_ms", "p95_ms", "p99_ms", "max_ms")
                )
                queued = r["queue_p95_ms"]
                queued = f"{queued:10.2f}" if queued == queued else f"{'-':>10}"
                lines.append(
                    f"{name:<28} {version:>3} {r['requests']:>8} {cells} {queued} "
                    f"{r['unanswered']:>10}  {errors}"
                )
        lines.append("status: " + ", ".join(f"{s} {self.statuses.get(s, 0)}" for s in STATUSES))
        volume = self.volume()
        if volume:
            lines.append(_volume_text(volume))
        codecs = [c for c in self.codecs() if c["codec"] != "none"]
        if codecs:
            lines.append(_codec_text(codecs))
        if any(c["uncompressed_bytes"] is None for c in codecs):
            lines.append("uncompressed sizes of compressed batches: not measured (--decompress)")
        return "\n".join(lines)


def capture_notes(stats, ports=()):
    """Lines on what the capture held besides exchanges: connections not taken as Kafka, by
    port, what it lost (gaps, packets cut by the snap length, bytes skipped) and what a peer
    abandoned (frames unfinished when the other side reset or closed the connection). `stats`:
    the core's counters (Dissector.stats); `ports`: the broker ports given (--port), after
    which the hint to give them has nothing to say."""
    other = Counter(stats["not_kafka_ports"])
    lines = []
    if other:
        shown = ", ".join(f"{p} x{n}" if n > 1 else p for p, n in other.most_common(8))
        lines.append(f"not Kafka: {sum(other.values())} TCP connections (ports {shown})")
        if not stats["kafka_connections"] and not ports:
            lines.append(
                "hint: no connection was taken as Kafka; name the broker ports with --port "
                "to dissect connections whose traffic does not show it"
            )
    abandoned = stats.get("bytes_abandoned", 0)
    gaps, cut = stats["gaps"], stats["cut_packets"]
    skipped = stats["bytes_skipped"] - abandoned
    lost = []
    if gaps:
        lost.append(f"{stats['bytes_missing']} bytes missing in {gaps} gaps")
    if cut:
        lost.append(f"{cut} packets cut by the snap length")
    if skipped:
        lost.append(f"{skipped} bytes skipped re-finding frame boundaries")
    if lost:
        lines.append("warning: the capture lost data: " + ", ".join(lost))
    if abandoned:
        # Not the capture's doing: a peer reset or closed the connection mid-frame.
        lines.append(
            f"note: {abandoned} bytes of frames left unfinished when the other side ended the "
            "connection (RST or FIN): abandoned by a peer, not lost by the capture"
        )
    if stats["evicted"]:
        lines.append(
            f"warning: {stats['evicted']} connections evicted, the longest idle, to bound the "
            "connections followed (--max-connections); later packets of theirs were followed "
            "as new connections"
        )
    return lines + tls_notes(stats) + evasion_notes(stats)


# What each TLS status says in the summary, of N connections.
_TLS_SAID = {
    "no_key": "no key for {n}: pass --tls-keylog (an SSLKEYLOGFILE of the clients)",
    "unsupported_cipher": "a cipher suite not decrypted here for {n}",
    "decrypt_failed": "decryption failed for {n} (the streams table's tls_error says where)",
    "incomplete": "the handshake not captured for {n}",
}


def tls_notes(stats):
    """A line on the connections that opened TLS: how many, how many were decrypted, and why
    the others were not. `stats`: the core's counters (Dissector.stats)."""
    tls = stats.get("tls") or {}
    total = sum(tls.values())
    if not total:
        return []
    parts = [f"TLS: {total} connections"]
    if tls.get("decrypted"):
        parts.append(f"{tls['decrypted']} decrypted")
    for status, said in _TLS_SAID.items():
        if tls.get(status):
            parts.append(said.format(n=tls[status]))
    return [", ".join(parts)]


def evasion_notes(stats):
    """Lines on segments that tell the dissector and a receiver apart unless it decides as
    the receiver does: overlaps that disagree, RSTs and SYNs a receiver ignores. `stats`:
    the core's counters (Dissector.stats)."""
    lines = []
    conflicting = stats["bytes_conflicting"]
    if conflicting:
        lines.append(
            f"warning: {conflicting} bytes of overlapping segments disagreed "
            "(the later copy was kept, as Linux keeps it)"
        )
    ignored = []
    if stats["rsts_ignored"]:
        ignored.append(f"{stats['rsts_ignored']} RSTs out of the window")
    if stats["syns_ignored"]:
        ignored.append(f"{stats['syns_ignored']} SYNs on open connections")
    if ignored:
        lines.append("warning: segments a receiver would ignore: " + ", ".join(ignored))
    return lines


def _api_order(item):
    (name, version), _ = item
    return (name is None, name or "", -1 if version is None else version)


def _n(value):
    return "-" if value is None else str(value)


def _volume_text(volume):
    lines = [
        f"{'volume':<10} {'topic':<30} {'batches':>8} {'records':>9} {'control':>7} "
        f"{'bytes':>12} {'uncompressed':>12} {'ratio':>6}"
    ]
    for r in volume:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        lines.append(
            f"{r['api_name']:<10} {r['topic']!s:<30} {_n(r['batches']):>8} "
            f"{_n(r['records']):>9} {_n(r['control_records']):>7} {_n(r['bytes']):>12} "
            f"{_n(r['uncompressed_bytes']):>12} {ratio:>6}"
        )
    return "\n".join(lines)


def _codec_text(codecs):
    lines = [f"{'codec':<10} {'':<30} {'bytes':>12} {'uncompressed':>12} {'ratio':>6}"]
    for c in codecs:
        ratio = "-" if c["ratio"] is None else f"{c['ratio']:.2f}"
        lines.append(
            f"{c['api_name']:<10} {c['codec']:<30} {c['bytes']:>12} "
            f"{_n(c['uncompressed_bytes']):>12} {ratio:>6}"
        )
    return "\n".join(lines)


def summarise(exchanges):
    summary = Summary()
    for e in exchanges:
        summary.add(e)
    return summary


def summarised(exchanges, summary):
    """The exchanges, each added to `summary` as it passes."""
    for e in exchanges:
        summary.add(e)
        yield e

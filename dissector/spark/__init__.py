"""Capture sets and very large captures on Apache Spark (4.0 or later).

    from dissector.spark import register
    register(spark)
    pairs = spark.read.format("kafka_pcap").option("table", "pairs").load("captures/*.pcap")

A capture no larger than the split size is dissected whole in one task (`whole.py`). A larger
one is cut into byte ranges, one task each, which read back over the ranges before their own,
check on the driver that they agree where they meet, and then build the table (`split.py`):
no packet leaves its task, and nothing is shuffled. Checking needs the driver between two
rounds of tasks, which a data source's reader cannot do: `register` routes `load()` of the
`kafka_pcap` format, in the sessions it was called for, to the pipeline (`pipeline.load`).
"""

import weakref

FORMAT = "kafka_pcap"


def __getattr__(name):  # pyspark is imported only when Spark is used
    if name in ("Dissected", "load"):
        from . import pipeline

        return getattr(pipeline, name)
    raise AttributeError(name)


_SESSIONS = weakref.WeakSet()  # the sessions `register` was called for


def register(spark):
    """Make `spark.read.format("kafka_pcap")` read captures in this session (other sessions
    of the process load as they did)."""
    _SESSIONS.add(spark)
    _route_loads(type(spark.read))


def _route_loads(reader_class):
    """Wrap format/option/options/load of the session's DataFrameReader class (the classic
    one or Spark Connect's) so that a `kafka_pcap` load runs the pipeline."""
    if getattr(reader_class, "_kafka_pcap", False):
        return
    original = {
        name: getattr(reader_class, name) for name in ("format", "option", "options", "load")
    }

    def format(self, source):
        self._kp_format = source
        return original["format"](self, source)

    def option(self, key, value):
        self.__dict__.setdefault("_kp_options", {})[key.lower()] = value
        return original["option"](self, key, value)

    def options(self, **opts):
        self.__dict__.setdefault("_kp_options", {}).update({k.lower(): v for k, v in opts.items()})
        return original["options"](self, **opts)

    def load_(self, path=None, format=None, schema=None, **opts):
        source = format or self.__dict__.get("_kp_format")
        spark = getattr(self, "_spark", None) or self._client
        if source != FORMAT or spark not in _SESSIONS:
            return original["load"](self, path, format, schema, **opts)
        given = {**self.__dict__.get("_kp_options", {}), **{k.lower(): v for k, v in opts.items()}}
        paths = given.pop("path", None) if path is None else path
        if paths is None:
            raise ValueError("kafka_pcap: give the capture paths to load()")
        from .pipeline import load

        return load(spark, paths, **given)

    reader_class.format = format
    reader_class.option = option
    reader_class.options = options
    reader_class.load = load_
    reader_class._kafka_pcap = True


__all__ = ["FORMAT", "Dissected", "load", "register"]

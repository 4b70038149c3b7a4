"""What each question command reads, which analysis answers it, and its own options."""

from dataclasses import dataclass, field

PAIRS = ("pairs",)


@dataclass
class Question:
    help: str
    analysis: object  # (tables: {name: DataFrame}, args) -> DataFrame
    tables: tuple = PAIRS
    description: str = ""
    formats: tuple = ("table", "csv", "json")
    records: str | None = None  # the --records default, when the analysis needs more
    arguments: list = field(default_factory=list)  # (flags, add_argument keywords)
    failed: object = None  # result -> whether the command exits 1
    bodies: object = None  # args -> whether the analysis reads the pairs' bodies (None: yes)

    def add_arguments(self, parser):
        for flags, kwargs in self.arguments:
            parser.add_argument(*flags, **kwargs)

    def status(self, result):
        return 1 if self.failed is not None and self.failed(result) else 0


def _groups(t, args):
    from ..analysis import group_generations, group_timeline

    return (group_timeline if args.timeline else group_generations)(t["pairs"])


def _transactions(t, args):
    from ..analysis import transactions

    return transactions(t["pairs"], records=t.get("records"))


def _errors(t, args):
    from ..analysis import error_counts, errors

    return errors(t["pairs"]) if args.all else error_counts(t["pairs"])


def _clients(t, args):
    from ..analysis import clients

    return clients(t["pairs"])


def _by(values):
    """--by api,client --by topic -> ["api", "client", "topic"]."""
    names = [n.strip() for v in values or ["api"] for n in v.split(",") if n.strip()]
    return names[0] if len(names) == 1 else names


def _grouped_by_a_body(args):
    """Whether latency's groups name a body column: else it reads none."""
    by = _by(args.by)
    return not {"request", "response"}.isdisjoint([by] if isinstance(by, str) else by)


def _latency(t, args):
    from ..analysis import latency

    return latency(t["pairs"], by=_by(args.by), freq=args.freq)


def _versions(t, args):
    from ..analysis import compatibility

    return compatibility(t["pairs"], broker=args.broker)


def _doctor(t, args):
    from ..analysis import diagnose

    return diagnose(
        t["pairs"], streams=t["streams"], partitions=t["partitions"], records=t.get("records")
    )


def _has_error(found):
    return bool(len(found)) and found["severity"].eq("error").any()


QUESTIONS = {
    "groups": Question(
        "consumer groups: one row per generation (--timeline: every group exchange)",
        _groups,
        arguments=[
            (
                ["--timeline"],
                {
                    "action": "store_true",
                    "help": "every group exchange in time order instead of the generations",
                },
            )
        ],
    ),
    "transactions": Question(
        "transactions: outcome, partitions, offsets, records, markers",
        _transactions,
        tables=("pairs", "records"),
        records="full",
    ),
    "errors": Question(
        "error counts by API and error name (--all: every error with its exchange)",
        _errors,
        arguments=[
            (
                ["--all"],
                {
                    "action": "store_true",
                    "help": "one row per error, with its exchange, level, topic and partition",
                },
            )
        ],
    ),
    "clients": Question("clients: software, API versions, connections, requests, errors", _clients),
    "latency": Question(
        "latency percentiles per API (or --by other columns), split into network, queue and "
        "broker time",
        _latency,
        bodies=_grouped_by_a_body,
        arguments=[
            (
                ["--by"],
                {
                    "action": "append",
                    "metavar": "COLUMNS",
                    "help": "grouping, comma-separated or repeated: api (default), version, "
                    "client, address, broker, topic, connection, status, or any pairs column",
                },
            ),
            (
                ["--freq"],
                {"help": "also per time window of this pandas frequency (1s, 500ms, 5min)"},
            ),
        ],
    ),
    "versions": Question(
        "API versions each client used, and whether a broker of --broker supports them",
        _versions,
        arguments=[
            (
                ["--broker"],
                {
                    "default": "4.0",
                    "help": "Apache Kafka broker version to check against (default %(default)s)",
                },
            )
        ],
    ),
    "doctor": Question(
        "what went wrong: findings with their frames, most severe first",
        _doctor,
        tables=("pairs", "streams", "partitions", "records"),
        description="What the captures show went wrong, or is worth knowing: one finding per "
        "problem, with who, when, a sentence to act on and the frames that prove it. Record "
        "sets are read as batches; --records full also reads every record (the records an "
        "aborted read handed over are then counted from them). Exit status 1 when a finding "
        "is of severity error, 0 otherwise (2 for a bad input).",
        formats=("text", "json", "csv"),
        failed=_has_error,
    ),
}


def answer(q, args, check, options):
    """The analysis of every capture, a leading `capture` column when there are several
    (each capture is analysed alone: stream numbers and offsets mean something only within
    one)."""
    import pandas as pd

    from ..source import read_tables

    tables = q.tables
    if "records" in tables and options.get("records") != "full":
        tables = tuple(t for t in tables if t != "records")  # --records batches: without it
    options = {**options, "bodies": q.bodies is None or q.bodies(args)}
    results = []
    for path in args.captures:
        t = read_tables(path, tables, args.port, args.progress, check, **options)
        results.append(q.analysis(t, args))
    if len(results) == 1:
        return results[0]
    parts = [r.assign(capture=str(p)) for p, r in zip(args.captures, results, strict=True)]
    out = pd.concat([p for p in parts if len(p)] or parts[:1], ignore_index=True)
    return out[["capture", *(c for c in out.columns if c != "capture")]]

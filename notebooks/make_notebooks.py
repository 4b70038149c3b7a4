#!/usr/bin/env python
"""Write the notebooks of this folder from the cells below and run them, so each is
committed with its outputs (tables and plots show on a Git host).

    python notebooks/make_notebooks.py            # all but 06, and both pictures
    python notebooks/make_notebooks.py 03 06      # these only
    python notebooks/make_notebooks.py report     # the picture of a report (report.png)

Every notebook but 06 takes its capture as a parameter (the cell tagged `parameters`):
`kafka-dissect report` runs them on any capture.

Each notebook is an investigation: a question, the code that answers it, the answer.
"""

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's package, whatever is installed
SETUP = """\
%matplotlib inline
from pathlib import Path

import pandas as pd

import dissector
from dissector import analysis as ka

SAMPLES = Path(dissector.__file__).resolve().parents[1] / "captures"  # wherever it is run from
pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 30)
pd.set_option("display.max_colwidth", 60)"""

NOTEBOOKS = {
    "01-first-look": [
        (
            "md",
            """# A first look at a capture

*What is in the capture (`kafka-python.pcap` unless `CAPTURE` names another), how fast did
the broker answer, and did anything fail?* Five cells: the summary, latency, errors.""",
        ),
        ("code", SETUP),
        ("parameters", 'CAPTURE = SAMPLES / "kafka-python.pcap"'),
        (
            "code",
            """from dissector.tables.summary import Summary

summary = Summary()
for exchange in dissector.dissect(CAPTURE):
    summary.add(exchange)
print(summary.text(Path(CAPTURE).name))""",
        ),
        (
            "code",
            """pairs = dissector.read_pcap(CAPTURE)
ka.latency(pairs).sort_values("p95_ms", ascending=False).head(5)""",
        ),
        ("code", "ka.errors(pairs)"),
        ("code", 'ka.plots.latency_over_time(pairs, freq="500ms")'),
        (
            "answer",
            """**Answer.** 51 exchanges from 5 client ids, all answered. Every API answers in well
under 2 ms except JoinGroup: Tansu holds the join for 3 s before it answers (the
rebalance delay). The only error is the `MEMBER_ID_REQUIRED` of the consumer's first
JoinGroup, which is how a Kafka 2.2+ broker hands out a member id: not a fault.""",
        ),
    ],
    "02-latency": [
        (
            "md",
            """# Where does the time go?

*Which requests are slow, for whom, and is the time spent on the network, waiting in the
connection's queue, or in the broker?* By default in `group-rebalance.pcap`, a consumer group
that rebalances five times.

`latency_ms = network_ms + queue_ms + broker_ms`: network is the time to carry the request
and response bytes, queue the time a request waits behind earlier ones on its connection,
broker the rest of the broker's time.""",
        ),
        ("code", SETUP),
        ("parameters", 'CAPTURE = SAMPLES / "group-rebalance.pcap"'),
        (
            "code",
            """pairs = dissector.read_pcap(CAPTURE)
ka.latency(pairs, by="api").sort_values("p50_ms", ascending=False)""",
        ),
        ("code", "ka.slowest(pairs, 5)"),
        ("code", 'ka.latency(pairs[pairs.api_name.eq("Heartbeat")], by="client_id")'),
        ("code", 'ka.plots.latency_heatmap(pairs, freq="2s")'),
        ("code", 'ka.plots.latency_over_time(pairs, freq="2s", stat="max_ms")'),
        (
            "answer",
            """**Answer.** Two APIs are slow, and by design: JoinGroup (about 3,000 ms: Tansu waits
for the group's members before it answers a join) and Fetch (about 500 ms: a long poll
that the broker holds for the consumer's `fetch.max.wait.ms` when there is no new data).
SyncGroup answers to followers wait about 1,000 ms for the leader's assignment. The rest
answer in under 1 ms at the median; Heartbeat, Produce and Metadata reach 5 to 25 ms at p95
and max, and the heat map puts those cells on the rebalances. All of it is broker time: on
loopback the network share is 0, and queueing is negligible (3 requests waited behind
another on their connection, at most 1.5 ms).""",
        ),
    ],
    "03-consumer-group-rebalances": [
        (
            "md",
            """# What happened to the consumer group?

*How many generations did each group go through, who led them, who got which partitions,
how long did each rebalance stop consumption, and how far behind did the group fall?* By
default in `group-rebalance.pcap`: three kafka-python consumers join `gr-group` one after
the other and leave again.""",
        ),
        ("code", SETUP),
        ("parameters", 'CAPTURE = SAMPLES / "group-rebalance.pcap"'),
        (
            "code",
            """tables = dissector.read_pcap(CAPTURE, table=["pairs", "partitions"])  # one reading
pairs, parts = tables["pairs"], tables["partitions"]
ka.rebalances(pairs)""",
        ),
        (
            "code",
            """gens = ka.group_generations(pairs)
gens[["generation_id", "leader_client_id", "assignment_by_client", "rebalance_ms"]]""",
        ),
        ("code", "ka.plots.group_gantt(pairs)"),
        (
            "code",
            """events = ka.group_timeline(pairs)
rows = events.api_name.isin(["JoinGroup", "SyncGroup", "LeaveGroup"]) | events.error_name.ne("NONE")
events[rows].drop(columns=["end", "member_id", "stream", "request_frame"])""",
        ),
        (
            "code",
            """lag = ka.lag(parts, pairs)
lag[lag.source.eq("commit")].groupby(["topic", "partition"])["lag"].agg(["max", "mean"])""",
        ),
        ("code", "ka.plots.lag_over_time(parts, pairs)"),
        (
            "answer",
            """**Answer.** Five generations (0 to 4): 1, 2, 3, 2 and 1 members. `gr-member-1` joined
first and led every generation, assigning with the range assignor: the four partitions of
`gr-orders` split 4 / 2+2 / 2+1+1 / 2+2 / 4. Each change costs a rebalance of 3 to 7 s (Tansu
holds JoinGroup about 3 s, followers then wait about 1 s for the leader's SyncGroup); the
members already in the group learn of it from `REBALANCE_IN_PROGRESS` on their heartbeats.
The members process two records a poll, so their commits trail the high watermark by up to
4 records after each burst of 12 and catch up within a second or two; the Fetch view shows
no lag because each fetch returns everything up to the high watermark.""",
        ),
    ],
    "04-transactions-and-delivery": [
        (
            "md",
            """# Did the transactions do what they should, and how long did records take?

*Which transactions committed, where are their markers, did a `read_committed` consumer see
aborted records, and how long did each record take from Produce to Fetch?* By default in
`transactions.pcap`: a transactional producer commits, aborts, and commits again; then a
`read_committed` and a `read_uncommitted` consumer read the topic.""",
        ),
        ("code", SETUP),
        ("parameters", 'CAPTURE = SAMPLES / "transactions.pcap"'),
        (
            "code",
            """# One reading of the capture, every record decoded: the records table holds them,
# the pairs table's bodies their batches.
tables = dissector.read_pcap(CAPTURE, table=["pairs", "records", "partitions"])
pairs, records, parts = tables["pairs"], tables["records"], tables["partitions"]
ka.transactions(pairs, records)""",
        ),
        ("code", "ka.aborted_reads(pairs, records)"),
        (
            "code",
            """matched = ka.delivery(records, pairs)
matched[["topic", "partition", "offset", "key", "consumer", "delay_ms"]]""",
        ),
        ("code", 'ka.delivery_summary(matched, by=["topic", "consumer"])'),
        ("code", "ka.plots.delivery_delays(matched)"),
        (
            "code",
            """ka.throughput(parts, freq="10s", by="partition")""",
        ),
        (
            "answer",
            """**Answer.** Three transactions of `tx-producer` (producer id 1, epoch 0): commit,
abort, commit, each ended by its EndTxn and followed in both partitions by a COMMIT or ABORT
control batch at the next offset. The `read_committed` consumer was nevertheless sent the
two aborted records (offset 3 of partition 0, offset 2 of partition 1), and with nothing in
the responses' `AbortedTransactions` it had no way to drop them: Tansu sends no aborted
transaction list and a last stable offset equal to the high watermark, so
`read_committed` isolation does not hold against it. Control records are counted apart
(`control_records`): 6 markers per reader. Records reached the `read_committed` reader
1.0 to 1.8 s after they were produced and the `read_uncommitted` reader 4.5 to 5.3 s after:
both readers started only once the producer had finished, so this is the scenario's pace,
not the broker's.""",
        ),
    ],
    "05-errors-and-unanswered": [
        (
            "md",
            """# What went wrong, across several captures?

*Every error at every level (top-level, topic, partition, resource, member) and every
exchange that never completed (unanswered, orphan response, malformed), with where and why:
by default in five of the recorded client captures.*""",
        ),
        ("code", SETUP),
        (
            "parameters",
            """names = ["kafka-python", "confluent-kafka", "aiokafka", "kcat", "group-rebalance"]
CAPTURES = [SAMPLES / f"{n}.pcap" for n in names]""",
        ),
        (
            "code",
            """read = {Path(c).stem: dissector.read_pcap(c) for c in CAPTURES}
found = pd.concat([ka.errors(pairs).assign(capture=n) for n, pairs in read.items()])
found.groupby(["capture", "api_name", "level", "error_name"], dropna=False).size()""",
        ),
        (
            "code",
            """# The findings: what went wrong without always an error code, with the frames.
diagnosed = [
    ka.diagnose(pairs, streams=dissector.read_pcap(c, table="streams")).assign(capture=n)
    for c, (n, pairs) in zip(CAPTURES, read.items(), strict=True)
]
findings = pd.concat(diagnosed, ignore_index=True)
findings[["capture", "severity", "kind", "client_id", "frames", "detail"]]""",
        ),
        (
            "code",
            """columns = ["capture", "client_id", "api_name", "api_version", "status", "reason"]
found[found.level.eq("exchange")][columns]""",
        ),
        (
            "code",
            """columns = ["capture", "client_id", "api_name", "topic", "partition", "error_name"]
found[found.level.eq("partition")][columns]""",
        ),
        (
            "code",
            """busiest = found.capture.mode().iat[0] if len(found) else next(iter(read))
ka.plots.error_timeline(read[busiest])""",
        ),
        (
            "answer",
            """**Answer.** Three kinds of trouble. (1) Tansu's departures from Kafka: it closes the
connection on kcat's Produce v1 (`unanswered`, connection ended) and sends ListOffsets v0
to kcat and OffsetFetch v3 to aiokafka responses shorter than their schemas (`malformed`,
with the byte offset where they run out). (2) A real partition-level error: after
`cf-events` is deleted, confluent-kafka's consumer fetches its three partitions by topic id
and gets `UNKNOWN_TOPIC_OR_PARTITION` for each (the id stays unresolved: no Metadata named
it). (3) Protocol chatter that is not a fault: `MEMBER_ID_REQUIRED` on each first
JoinGroup and `REBALANCE_IN_PROGRESS` on the heartbeats of members when another joins.
The findings name what has no error code: kcat cannot parse Tansu's ApiVersions v3 answer
and reconnects (`client_rejected_response`, with the FIN frames), and Tansu answers Produce
requests sent with acks=0, which the clients never asked for (`unexpected_response`).""",
        ),
    ],
    "06-spark-at-scale": [
        (
            "md",
            """# The same questions over a capture set, on Spark

*Across every sample capture at once, loaded through the `kafka_pcap` Spark data source in
local mode: which captures hold the slowest requests, which groups rebalanced, which
transactions aborted, and what failed?*

Spark returns the same tables with a `capture` column. `latency`, `error_counts`,
`clients` and `throughput` take the Spark DataFrame itself: they aggregate in Spark and
bring back only their small result, as pandas. The analyses that follow a group or a
transaction exchange by exchange take the rows as pandas: on a capture set too large for
one machine, filter in Spark first and bring back only the rows they need.""",
        ),
        (
            "code",
            """%matplotlib inline
import warnings
from pathlib import Path

import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import dissector
from dissector import analysis as ka
from dissector.spark import register

warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 30)
pd.set_option("display.max_colwidth", 60)
spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.sql.shuffle.partitions", "4")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
register(spark)
SAMPLES = Path(dissector.__file__).resolve().parents[1] / "captures"  # wherever it is run from""",
        ),
        (
            "parameters",
            """# A path, a glob or a list: by default the client scenarios (findings-* captures hold
# one misbehaviour each).
CAPTURES = [str(p) for p in sorted(SAMPLES.glob("*.pcap")) if not p.name.startswith("findings")]""",
        ),
        (
            "code",
            """pairs = spark.read.format("kafka_pcap").load(CAPTURES)  # table "pairs"
pairs = pairs.cache()  # dissected once for the analyses below
p99 = F.percentile_approx("latency_ms", 0.99).alias("p99_ms")
pairs.groupBy("capture").agg(F.count("*").alias("exchanges"), p99).orderBy("capture").toPandas()""",
        ),
        (
            "code",
            """# computed in Spark: percentiles by percentile_approx, only the result comes back
ka.latency(pairs, by=["capture", "api"]).sort_values("p99_ms", ascending=False).head(8)""",
        ),
        ("code", 'ka.error_counts(pairs, by=["capture", "api_name", "level", "error_name"])'),
        (
            "code",
            """who = ["capture", "client_id", "software_name", "software_version"]
ka.clients(pairs)[[*who, "connections", "requests", "errors"]]""",
        ),
        (
            "code",
            """partitions = spark.read.format("kafka_pcap").option("table", "partitions")
partitions = partitions.load(CAPTURES)
ka.throughput(partitions, freq="10s", by="topic").sort_values("bytes", ascending=False).head(8)""",
        ),
        (
            "code",
            """df = pairs.toPandas()  # groups and transactions are followed row by row, in pandas
ka.rebalances(df)""",
        ),
        ("code", 'ka.transactions(df)[["capture", "transactional_id", "outcome", "markers"]]'),
        (
            "code",
            """figure = ka.plots.group_gantt(df[df.capture.str.endswith("group-rebalance.pcap")])
spark.stop()
figure""",
        ),
        (
            "md",
            """**Answer.** The same answers as the single-capture notebooks, side by side: the
slowest requests everywhere are Tansu's held JoinGroups (about 3 s) and Fetch long polls (about
500 ms); four captures hold consumer groups and only `gr-group` rebalanced (5 generations);
the only transactions are the three of `transactions.pcap` (commit, abort, commit); and the
failures are notebook 05's plus three more: a Fetch long poll (compression) and a Metadata
request (transactions) left unanswered when their clients closed the connection at the end
of the recording, and the OFFSET_OUT_OF_RANGE that the 0.7 capture was built to contain.""",
        ),
    ],
}


def cell(kind, src):
    """A notebook cell: "md", "code", "parameters" (the code cell a report replaces values
    of, papermill-style) or "answer" (the conclusion about the sample capture, left out of a
    report on another one)."""
    if kind in ("md", "answer"):
        c = nbformat.v4.new_markdown_cell(src)
    else:
        c = nbformat.v4.new_code_cell(src)
    if kind in ("parameters", "answer"):
        c.metadata["tags"] = [kind]
    return c


def build(name, cells):
    from dissector.report.build import kernel_env

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [cell(kind, src) for kind, src in cells]
    NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
        resources={"metadata": {"path": str(HERE)}},
    ).execute(env=kernel_env())  # the kernel imports this checkout's package too
    path = HERE / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def write_image():
    """The README's picture: the rebalancing group of notebook 03."""
    import dissector
    from dissector.analysis import plots

    pairs = dissector.read_pcap(HERE.parent / "captures" / "group-rebalance.pcap")
    path = HERE / "group-rebalances.png"
    plots.group_gantt(pairs).savefig(path, dpi=100)
    return path


def write_report_image():
    """The README's picture of a report: the top of `kafka-dissect report` on
    transactions.pcap, findings first, in headless Chromium."""
    import tempfile

    from dissector.report.build import write_report
    from dissector.report.screenshot import chromium, screenshot

    if chromium() is None:
        print("no chromium: report.png left as it is", file=sys.stderr)
        return None
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        failed = write_report(HERE.parent / "captures" / "transactions.pcap", page)
        if failed:
            raise SystemExit("\n".join(failed))
        return screenshot(page, HERE / "report.png", width=1100, height=1500)


def main(argv):
    wanted = argv or [n for n in NOTEBOOKS if not n.startswith("06")]
    for name, cells in NOTEBOOKS.items():
        if any(name.startswith(w) for w in wanted):
            print(build(name, cells))
    if any("03-consumer-group-rebalances".startswith(w) for w in wanted):
        print(write_image())
    if not argv or "report" in argv:  # the report runs 01 to 05 as committed
        print(write_report_image())


if __name__ == "__main__":
    main(sys.argv[1:])

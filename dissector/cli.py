"""kafka-dissect: the command line."""

import argparse
import os
import sys
import traceback
import warnings

from . import commands, heap, source
from .arguments import (
    add_bodies,
    add_compress_values,
    add_dissection_arguments,
    add_run_arguments,
    dissection_options,
)
from .errors import DissectorError
from .live import cli as live_cli
from .report import cli as report_cli
from .spark import cli as spark_cli
from .tables import FORMATS, TABLES
from .tables.summary import Summary, capture_notes, summarised


def build_parser():
    parser = argparse.ArgumentParser(
        prog="kafka-dissect", description="Kafka wire-protocol dissector and traffic analyzer"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    analyze = sub.add_parser("analyze", help="decode capture files and summarise the traffic")
    analyze.add_argument("captures", nargs="+", help="pcap or pcapng files (optionally .gz)")
    analyze.add_argument("-o", "--output", help=f"write the table to a file ({', '.join(FORMATS)})")
    analyze.add_argument(
        "--table",
        choices=sorted(TABLES),
        default="pairs",
        help="which table -o writes (default %(default)s)",
    )
    add_bodies(analyze)
    add_compress_values(analyze)
    add_dissection_arguments(analyze)
    add_run_arguments(analyze)
    commands.add_parsers(sub)
    report_cli.add_parser(sub)
    live_cli.add_parser(sub)
    spark_cli.add_parser(sub)
    return parser


def checked(dissection, debug):
    """The exchanges of one capture as they complete; the reader's warnings go to stderr at
    the end, and an internal error becomes one line naming the frame and offset."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield from dissection
    except DissectorError:
        raise
    except Exception as e:  # a bug: say where, without a traceback unless asked
        if debug:
            traceback.print_exc()
        where = f"frame {dissection.frame}"
        if dissection.offset is not None:
            where += f", offset {dissection.offset}"
        detail = " ".join(str(e).split())  # one line, whatever the exception says
        raise DissectorError(
            f"{dissection.path}: {where}: internal error: {type(e).__name__}: {detail}"
        ) from e
    for w in caught:
        print(f"kafka-dissect: warning: {w.message}", file=sys.stderr)


def analyze(args):
    table = args.table
    writer = behind = None
    options = dissection_options(args, table if args.output else None)
    if args.output:  # Arrow and pandas are loaded only to write a table
        from .tables import arrow_batches, records_behind
        from .tables.output import TableWriter

        several = len(args.captures) > 1
        if table == "records" and records_behind.usable():  # see records_behind.py
            writer = behind = records_behind.RecordsBehind(
                args.output, several, args.compress_values
            )
        else:
            writer = TableWriter(args.output, table, several, args.compress_values, background=True)
    try:
        for path in args.captures:
            dissection = source.dissect(
                path,
                args.port,
                progress=args.progress,
                streams=writer is not None and table == "streams",
                **options,
            )
            summary = Summary.of(dissection.dissector.options)
            exchanges = summarised(checked(dissection, args.debug), summary)
            if writer is None or table == "streams":
                for _ in exchanges:
                    pass
            elif behind is not None:
                behind.write(exchanges, path, dissection.dissector.options)
            else:
                kept = dissection.dissector.options.for_tables()
                for batch in arrow_batches(exchanges, table, **kept):
                    writer.write(batch, capture=path)
            if writer is not None and table == "streams":
                for batch in arrow_batches(dissection.ended, "streams"):
                    writer.write(batch, capture=path)
            stats = dissection.stats()
            exchanges_seen = sum(summary.statuses.values())
            title = (
                f"{path}: {stats['packets']} packets, {stats['connections']} TCP connections "
                f"examined, {stats['kafka_connections']} Kafka, {exchanges_seen} exchanges"
            )
            print(summary.text(title))
            for line in capture_notes(stats, args.port):
                print(line)
            print()
    finally:
        if writer is not None:
            writer.close()
    if writer is not None:
        print(f"wrote {writer.rows} rows of {table} to {args.output}")
    return 0


def _tune_for_a_whole_capture():
    """Process settings for a run that reads captures to their end and exits."""
    heap.keep_frames()
    heap.fewer_collections()
    # numpy (loaded with the tables) starts BLAS threads that spin, on cores the dissection
    # could use; it computes nothing with them here.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    heap.arrow_from_heap()  # a records table's run peaks 43 MB lower


def main(argv=None, own_process=False):
    """The command line; own_process: the process is this command's alone (the console
    script), so `analyze` may tune it."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "spark":
            return spark_cli.run(args)
        if args.command == "live":
            if own_process:
                heap.fewer_collections()
            return live_cli.run(args)
        if args.command == "report":
            return report_cli.run(args)
        if own_process:
            _tune_for_a_whole_capture()
        if args.command in commands.QUESTIONS:
            return commands.run(args, checked)
        return analyze(args)
    except DissectorError as e:
        print(f"kafka-dissect: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (| head): nothing more to say. Point stdout at /dev/null so
        # the interpreter's final flush does not complain either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (ValueError, OSError) as e:
        print(f"kafka-dissect: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kafka-dissect: interrupted", file=sys.stderr)
        return 130


def run():
    """The `kafka-dissect` console script."""
    sys.exit(main(own_process=True))


if __name__ == "__main__":
    run()

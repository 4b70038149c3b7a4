"""kafka-dissect: the command line."""

import argparse
import sys
import traceback
import warnings

from . import source
from .errors import DissectorError
from .options import DEFAULT_MAX_FRAME, RECORD_MODES, Options
from .protocol.apikeys import FETCH, PRODUCE
from .tables import TABLES, build_table
from .tables.output import FORMATS, write_table
from .tables.summary import summary_text, topic_volume, volume_text


def build_parser():
    parser = argparse.ArgumentParser(
        prog="kafka-dissect", description="Kafka wire-protocol dissector and traffic analyzer"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    analyze = sub.add_parser("analyze", help="decode capture files and summarise the traffic")
    analyze.add_argument("captures", nargs="+", help="pcap or pcapng files (optionally .gz)")
    analyze.add_argument(
        "--port",
        type=int,
        action="append",
        default=[],
        help="broker port (repeatable); default: find Kafka on any port",
    )
    analyze.add_argument("-o", "--output", help=f"write the table to a file ({', '.join(FORMATS)})")
    analyze.add_argument(
        "--table",
        choices=sorted(TABLES),
        default="pairs",
        help="which table -o writes (default %(default)s)",
    )
    analyze.add_argument(
        "--records",
        choices=RECORD_MODES,
        default="batches",
        help="how far record sets are decoded: every record, batch headers and sizes, or "
        "sizes only (default %(default)s; --table records implies full)",
    )
    analyze.add_argument(
        "--max-decompressed",
        type=int,
        default=Options.max_decompressed,
        help="bytes one record batch may decompress to (default %(default)s)",
    )
    analyze.add_argument(
        "--max-ratio",
        type=int,
        default=Options.max_ratio,
        help="decompression ratio beyond which a batch is reported as a bomb (default %(default)s)",
    )
    analyze.add_argument(
        "--max-frame",
        type=int,
        default=DEFAULT_MAX_FRAME,
        help="largest Kafka frame accepted, in bytes (default %(default)s)",
    )
    analyze.add_argument(
        "--protocol",
        choices=["0.7", "0.8+"],
        help="protocol generation of every connection (default: decided per connection)",
    )
    analyze.add_argument(
        "--show-secrets",
        action="store_true",
        help="show SASL passwords, proofs and tokens instead of redacting them",
    )
    progress = analyze.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress", action="store_true", default=None, help="always show progress"
    )
    progress.add_argument(
        "--no-progress", dest="progress", action="store_false", help="never show progress"
    )
    analyze.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    return parser


def collect(dissection, debug):
    """Every exchange of one capture, with the reader's warnings shown on stderr."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            exchanges = list(dissection)
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
    return exchanges


def analyze(args):
    outputs = []
    for path in args.captures:
        dissection = source.dissect(
            path,
            args.port,
            progress=args.progress,
            max_frame=args.max_frame,
            protocol=args.protocol,
            show_secrets=args.show_secrets,
            records="full" if args.output and args.table == "records" else args.records,
            max_decompressed=args.max_decompressed,
            max_ratio=args.max_ratio,
        )
        exchanges = collect(dissection, args.debug)
        pairs = build_table(exchanges, "pairs")
        d = dissection.dissector
        title = (
            f"{path}: {d.packets} packets, {d.connections} TCP connections examined, "
            f"{d.kafka_connections} Kafka, {len(pairs)} exchanges"
        )
        print(summary_text(pairs, title))
        # Only Produce and Fetch carry volume: a Metadata response may list every partition.
        data = [e for e in exchanges if e.api_key in (PRODUCE, FETCH) and e.protocol == "0.8+"]
        volume = topic_volume(build_table(data, "partitions"))
        if not volume.empty:
            print(volume_text(volume))
        print()
        if args.output:
            table = build_table(exchanges, args.table, d.streams)
            if len(args.captures) > 1:
                table.insert(0, "capture", str(path))
            outputs.append(table)
    if args.output:
        import pandas as pd

        table = outputs[0] if len(outputs) == 1 else pd.concat(outputs, ignore_index=True)
        write_table(table, args.output)
        print(f"wrote {len(table)} rows of {args.table} to {args.output}")
    return 0


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return analyze(args)
    except DissectorError as e:
        print(f"kafka-dissect: error: {e}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as e:
        print(f"kafka-dissect: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kafka-dissect: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

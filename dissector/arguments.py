"""The command-line options of a dissection, one set for `analyze`, `live` and `spark`."""

from .options import DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_FRAME, RECORD_MODES, Options


def add_dissection_arguments(p):
    """--port and the Options fields, on the parser of one command."""
    p.add_argument(
        "--port",
        type=int,
        action="append",
        default=[],
        help="broker port (repeatable); default: find Kafka on any port",
    )
    p.add_argument(
        "--records",
        choices=RECORD_MODES,
        default="batches",
        help="how far record sets are decoded: every record, batch headers and sizes, or "
        "sizes only (default %(default)s; --table records implies full)",
    )
    p.add_argument(
        "--decompress",
        action="store_true",
        help="decompress every compressed batch, to report uncompressed sizes and ratios in "
        "the summary (--records full decompresses the records it decodes, not for the summary)",
    )
    p.add_argument(
        "--max-decompressed",
        type=int,
        default=Options.max_decompressed,
        help="bytes the record sets of one request or response may decompress to, all "
        "together (default %(default)s)",
    )
    p.add_argument(
        "--max-ratio",
        type=int,
        default=Options.max_ratio,
        help="decompressed to compressed bytes, over a request's or response's record sets "
        "and over the whole run, beyond which a batch is reported as a bomb (default "
        "%(default)s)",
    )
    p.add_argument(
        "--max-frame",
        type=int,
        default=DEFAULT_MAX_FRAME,
        help="largest Kafka frame accepted, in bytes (default %(default)s)",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=DEFAULT_MAX_CONNECTIONS,
        help="connections followed at once; beyond, the longest idle are ended (default "
        "%(default)s)",
    )
    p.add_argument(
        "--protocol",
        choices=["0.7", "0.8+"],
        help="protocol generation of every connection (default: decided per connection)",
    )
    p.add_argument(
        "--tls-keylog",
        metavar="FILE",
        help="NSS key log (SSLKEYLOGFILE) with the secrets of TLS connections, to decrypt them "
        "(read again as it grows); secrets a pcapng carries are used without it",
    )
    p.add_argument(
        "--topic",
        action="append",
        default=[],
        help="keep only this topic in the records and partitions tables (repeatable); the "
        "records of other topics are not decompressed",
    )
    p.add_argument(
        "--partition",
        type=int,
        action="append",
        default=[],
        help="keep only this partition in the records and partitions tables (repeatable)",
    )
    p.add_argument(
        "--show-secrets",
        action="store_true",
        help="show SASL passwords, proofs and tokens instead of redacting them",
    )


def add_bodies(p):
    p.add_argument(
        "--no-bodies",
        dest="bodies",
        action="store_false",
        help="leave the pairs table's request and response empty (work that reads no body: "
        "latency, throughput)",
    )


def add_compress_values(p):
    p.add_argument(
        "--compress-values",
        action="store_true",
        help="in parquet, compress the records' keys and values too (by default they are "
        "written as they are: faster, a larger file)",
    )


def add_run_arguments(p):
    """Progress and tracebacks, for the commands that read captures to their end."""
    progress = p.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress", action="store_true", default=None, help="always show progress"
    )
    progress.add_argument(
        "--no-progress", dest="progress", action="store_false", help="never show progress"
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")


def dissection_options(args, written=None):
    """The Options fields the arguments give (ports apart). `written`: the table the command
    writes, if any; the records table needs every record parsed, whatever --records says."""
    records = "full" if written == "records" else args.records
    return {
        "protocol": args.protocol,
        "max_frame": args.max_frame,
        "show_secrets": args.show_secrets,
        "records": records,
        "decompress": args.decompress,
        "max_decompressed": args.max_decompressed,
        "max_ratio": args.max_ratio,
        "max_connections": args.max_connections,
        "tls_keylog": args.tls_keylog,
        "topics": args.topic,
        "partitions": args.partition,
        "bodies": getattr(args, "bodies", True),
    }

"""One command per question about a capture: `groups`, `transactions`, `errors`, `clients`,
`latency`, `versions`, `doctor`. Each reads its captures (every table it needs from one
dissection), runs one analysis and prints the result as a table, csv or JSON lines."""

import sys

from ..arguments import add_dissection_arguments, add_run_arguments, dissection_options
from .questions import QUESTIONS


def add_parsers(sub):
    """The question commands, on the parser's subcommands."""
    for name, q in QUESTIONS.items():
        p = sub.add_parser(name, help=q.help, description=q.description or q.help)
        p.add_argument("captures", nargs="+", help="pcap or pcapng files (optionally .gz)")
        formats = q.formats
        p.add_argument(
            "--format",
            choices=formats,
            default=formats[0],
            help=f"{formats[0]} (default), or for scripts: csv (a header and rows), json (one "
            "object per line); lists and nested values as compact JSON, times in ISO 8601",
        )
        q.add_arguments(p)
        add_dissection_arguments(p)
        if q.records:
            p.set_defaults(records=q.records)
        add_run_arguments(p)


def run(args, check):
    """Run the question command `args` names; `check` wraps a dissection's exchanges (the
    command line's error reporting). Returns the exit status."""
    from .questions import answer
    from .render import WRITERS, write_table

    q = QUESTIONS[args.command]
    result = answer(q, args, lambda d: check(d, args.debug), dissection_options(args))
    if args.format == "table":
        write_table(result, sys.stdout, title=args.command)
    else:
        WRITERS[args.format](result, sys.stdout)
    return q.status(result)

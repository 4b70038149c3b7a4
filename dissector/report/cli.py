"""`kafka-dissect report CAPTURE -o report.html`."""

import sys

from ..errors import DissectorError


def add_parser(sub):
    p = sub.add_parser(
        "report",
        help="run the investigation notebooks on a capture and write one HTML page",
        description="Run notebooks 01 to 05 on a capture (injected as their CAPTURE "
        "parameter) and write one HTML page: the findings of `doctor` first, then each "
        "notebook's tables and plots, code hidden. Needs nbconvert and a Jupyter kernel; "
        "the notebooks are read from the source checkout the package runs from. Exit status "
        "1 when a notebook cell failed (the page shows the error), 2 for a bad input.",
    )
    p.add_argument("capture", help="pcap or pcapng file (optionally .gz)")
    p.add_argument("-o", "--output", default="report.html", help="HTML file (default %(default)s)")
    p.add_argument(
        "--timeout", type=int, default=300, help="seconds a cell may run (default %(default)s)"
    )


def run(args):
    try:
        import nbclient  # noqa: F401
        import nbconvert  # noqa: F401
    except ImportError as e:
        raise DissectorError(
            f"report needs nbconvert, nbclient and ipykernel ({e.name} is missing): "
            "pip install 'kafka-dissector[report]'"
        ) from None
    from .build import write_report

    say = None
    if sys.stderr.isatty():  # a report takes seconds per notebook: say which is running

        def say(step):
            print(f"report: {step}", file=sys.stderr)

    failed = write_report(args.capture, args.output, timeout=args.timeout, say=say)
    for line in failed:
        print(f"kafka-dissect: warning: {line}", file=sys.stderr)
    print(f"wrote {args.output}")
    return 1 if failed else 0

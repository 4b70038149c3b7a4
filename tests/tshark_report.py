"""The figures of the README's "Agreement with Wireshark" section, from the tshark tests' own
comparison: `python tests/tshark_report.py` prints the table, one row per sample capture."""

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import test_tshark  # noqa: E402
import test_tshark_bodies  # noqa: E402
import tshark_known  # noqa: E402
import tshark_oracle  # noqa: E402

import dissector  # noqa: E402

COLUMNS = (
    "capture",
    "Kafka PDUs",
    "requests",
    "paired responses",
    "bodies compared",
    "values",
    "agree",
    "tshark wrong",
    "undecodable version",
    "unpaired by tshark",
    "cut short",
)


def rows():
    total = Counter()
    for path in tshark_oracle.SAMPLES:
        port = tshark_oracle.manifest(path)["broker_port"]
        pdus = tshark_oracle.kafka_pdus(path, port)
        headers = test_tshark.agreement(list(dissector.dissect(path)), pdus, port)
        r = test_tshark_bodies.report(path)
        wrong = sum(r.known.values())
        figures = Counter(
            {
                "Kafka PDUs": len(pdus),
                "requests": headers["requests"],
                "paired responses": headers["responses"],
                "bodies compared": r.pdus,
                "values": r.values,
                "agree": r.agreements,
                "tshark wrong": wrong,
                "undecodable version": r.unsupported,
                "unpaired by tshark": r.unpaired,
                "cut short": len(r.truncated),
            }
        )
        total += figures
        classes = Counter(r.known) + Counter(name for name, _ in r.misdisplayed)
        yield path.stem, figures, classes
    yield "all", total, Counter()


def main():
    print("| " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---:|" * (len(COLUMNS) - 1))
    notes = []
    for name, figures, classes in rows():
        print("| " + " | ".join([name] + [f"{figures[c]:,}" for c in COLUMNS[1:]]) + " |")
        notes += [f"{name}: {n} {known}" for known, n in sorted(classes.items())]
    print()
    print("\n".join(notes))
    print("known classes:", ", ".join(k.name for k in tshark_known.KNOWN))


if __name__ == "__main__":
    main()

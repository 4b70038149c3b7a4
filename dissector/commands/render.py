"""An analysis result on stdout: a terminal table, csv or JSON lines; findings as text.

One text form for every cell, so a script reading csv and a person reading the table see the
same thing: timestamps in ISO 8601 with every digit the capture has and a `Z`, lists and
dicts as compact JSON (keys sorted), bytes as base64, missing values empty."""

import base64
import csv
import datetime
import json
import math
import textwrap

import numpy as np
import pandas as pd

from ..analysis.findings import SEVERITIES


def plain(value):
    """A cell as a JSON value: None for a missing one."""
    if value is None or value is pd.NaT or value is pd.NA:
        return None
    if isinstance(value, pd.Timestamp):
        return value.tz_convert("UTC").isoformat().replace("+00:00", "Z")
    if isinstance(value, datetime.datetime):
        return plain(pd.Timestamp(value).tz_localize("UTC") if value.tzinfo is None else value)
    if isinstance(value, pd.Timedelta):
        return value.total_seconds() * 1000  # milliseconds, as every duration here
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, np.ndarray)):
        return [plain(v) for v in value]
    return value


def text(value, digits=None):
    """A cell as text; floats to `digits` decimals when given (the terminal table)."""
    value = plain(value)
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and digits is not None:
        return f"{value:.{digits}f}"
    return str(value)


def write_csv(df, out):
    w = csv.writer(out, lineterminator="\n")
    w.writerow(df.columns)
    for row in df.itertuples(index=False):
        w.writerow([text(v) for v in row])


def write_jsonl(df, out):
    columns = list(df.columns)
    for row in df.itertuples(index=False):
        item = {c: plain(v) for c, v in zip(columns, row, strict=True)}
        out.write(json.dumps(item, ensure_ascii=False) + "\n")


def write_table(df, out, title=None):
    """A rich table, as wide as its cells when stdout is not a terminal (a file keeps every
    column whole)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    numeric = {c for c in df.columns if pd.api.types.is_numeric_dtype(df[c])}
    for c in df.columns:
        table.add_column(str(c), justify="right" if c in numeric else "left", overflow="fold")
    for row in df.itertuples(index=False):
        table.add_row(*(text(v, digits=3) for v in row))
    console = Console(file=out, highlight=False)
    if not console.is_terminal:
        from rich.measure import Measurement

        wide = console.options.update_width(100_000)
        console.width = max(80, Measurement.get(console, wide, table).maximum)
    if df.empty:
        console.print(f"{title + ': ' if title else ''}nothing found")
        return
    console.print(table)


def write_findings(df, out):
    """Findings grouped by severity, most severe first, one block each: kind, who, when,
    detail, frames."""
    if df.empty:
        out.write("no findings\n")
        return
    for severity in SEVERITIES:
        rows = df[df["severity"] == severity]
        if rows.empty:
            continue
        out.write(f"{severity.upper()} ({len(rows)})\n\n")
        for f in rows.itertuples(index=False):
            capture = getattr(f, "capture", None)
            out.write(f"  {f.kind}{f'  [{capture}]' if capture else ''}\n")
            who = ", ".join(
                part
                for part in (
                    text(f.client_id) and f"client id {text(f.client_id)}",
                    text(f.client) and f"client {text(f.client)}",
                    text(f.broker) and f"broker {text(f.broker)}",
                )
                if part
            )
            if who:
                out.write(f"    who:    {who}\n")
            if text(f.time):
                out.write(f"    when:   {text(f.time)}\n")
            lead = "    detail: "
            out.write(
                textwrap.fill(
                    text(f.detail), 100, initial_indent=lead, subsequent_indent=" " * len(lead)
                )
                + "\n"
            )
            frames = plain(f.frames) or []
            out.write(f"    frames: {', '.join(map(str, frames)) or '-'}\n\n")


WRITERS = {"table": write_table, "csv": write_csv, "json": write_jsonl, "text": write_findings}

"""Writing tables to parquet, csv and jsonl.

Nested values (decoded bodies, lists) become JSON text in parquet and csv and JSON in jsonl;
bytes become base64 text, except in parquet, which keeps the record keys and values binary.
"""

import base64
import json
from pathlib import Path

FORMATS = (".parquet", ".csv", ".jsonl")
NESTED = ("request", "response", "topics", "headers", "control")
BINARY = ("key", "value")  # the records table's keys and values


def jsonable(value):
    """Nested decoded values made JSON-safe: bytes as base64 text, dict keys as text."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


def to_json_text(value):
    return None if value is None else json.dumps(jsonable(value), separators=(",", ":"))


def write_table(df, path):
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"{path}: output format must be one of {', '.join(FORMATS)}")
    out = df.copy()
    if suffix != ".parquet":
        for name in BINARY:
            if name in out:
                out[name] = out[name].map(jsonable)
    if suffix == ".jsonl":
        for name in NESTED:
            if name in out:
                out[name] = out[name].map(jsonable)
        out.to_json(path, orient="records", lines=True, date_format="iso", date_unit="ns")
        return path
    for name in NESTED:
        if name in out:
            out[name] = out[name].map(to_json_text)
    if suffix == ".parquet":
        out.to_parquet(path, index=False)
    else:
        out.to_csv(path, index=False)
    return path

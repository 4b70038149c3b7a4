"""Regenerate the protocol schema data from Apache Kafka's message definitions.

    python tools/gen_schema.py [--source ../shared/kafka-protocol]

The output keeps only wire facts (names, types, version ranges, tags, which fields name
topics); documentation text is dropped. Common structs are resolved inline so that every
message definition is self-contained. The Apache notice and LICENSE are written beside it.
"""

import argparse
import json
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "dissector" / "protocol" / "definitions"
DEFAULT_SOURCE = ROOT.parent / "shared" / "kafka-protocol"
MAX_VERSION = 32767
NOTICE = """kafka_messages.json is derived from the Apache Kafka protocol message definitions
(clients/src/main/resources/common/message/*.json of Apache Kafka), reduced to their
wire facts (field names, types, version ranges, tags) by tools/gen_schema.py.

    Apache Kafka
    Copyright The Apache Software Foundation.

    This product includes software developed at
    The Apache Software Foundation (https://www.apache.org/).

Licensed under the Apache License, Version 2.0 (see LICENSE in this directory).
"""


def parse_versions(text):
    """'0+' -> [0, MAX], '1-3' -> [1, 3], '2' -> [2, 2], 'none'/'' -> None."""
    if text is None or text in ("", "none"):
        return None
    text = text.strip()
    if text.endswith("+"):
        return [int(text[:-1]), MAX_VERSION]
    if "-" in text:
        lo, hi = text.split("-")
        return [int(lo), int(hi)]
    return [int(text), int(text)]


def load_json(path):
    # The definitions are JSON with // comments; no string in them holds "//".
    text = re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.M)
    text = re.sub(r"\s//[^\n\"]*$", "", text, flags=re.M)
    return json.loads(text)


def convert_fields(fields, common):
    out = []
    for f in fields:
        field = {"name": f["name"], "type": f["type"], "versions": parse_versions(f["versions"])}
        for key, name in (
            ("nullableVersions", "nullable"),
            ("taggedVersions", "tagged"),
            ("flexibleVersions", "flexible"),
        ):
            if key in f:
                field[name] = parse_versions(f[key])
        if "tag" in f:
            field["tag"] = int(f["tag"])
        if f.get("entityType") == "topicName":
            field["topic"] = True
        elem = f["type"][2:] if f["type"].startswith("[]") else f["type"]
        if "fields" in f:
            field["fields"] = convert_fields(f["fields"], common)
        elif elem in common:
            field["fields"] = convert_fields(common[elem], common)
        if "fields" in field:
            field["type"] = "[]struct" if f["type"].startswith("[]") else "struct"
        out.append(field)
    return out


def convert_message(d):
    common = {s["name"]: s["fields"] for s in d.get("commonStructs", [])}
    return {
        "name": d["name"],
        "validVersions": parse_versions(d["validVersions"]),
        "flexibleVersions": parse_versions(d.get("flexibleVersions", "none")),
        "fields": convert_fields(d["fields"], common),
    }


def build(source):
    messages = source / "messages"
    apis, headers, data = {}, {}, {}
    files = sorted(messages.glob("*.json")) + sorted((messages / "legacy").glob("*.json"))
    for path in files:
        d = load_json(path)
        msg = convert_message(d)
        if d["type"] in ("request", "response"):
            api = apis.setdefault(str(d["apiKey"]), {"name": None, "request": [], "response": []})
            api[d["type"]].append(msg)
            if d["type"] == "request":
                api["name"] = d["name"].removesuffix("Request")
        elif d["type"] == "header":
            headers[d["name"]] = msg
        else:
            data[d["name"]] = msg
    # A legacy definition covers only the versions its newer sibling cannot describe.
    for api in apis.values():
        for kind in ("request", "response"):
            defs = api[kind]
            if len(defs) > 1:
                main, *legacy = defs
                for old in legacy:
                    old["validVersions"] = [
                        old["validVersions"][0],
                        min(old["validVersions"][1], main["validVersions"][0] - 1),
                    ]
    ordered = {k: apis[k] for k in sorted(apis, key=int)}
    return {"apis": ordered, "headers": headers, "data": data}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--out", type=Path, default=OUT_DIR)
    args = ap.parse_args()
    schema = build(args.source)
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "kafka_messages.json"
    target.write_text(json.dumps(schema, separators=(",", ":"), sort_keys=False) + "\n")
    (args.out / "NOTICE").write_text(NOTICE)
    shutil.copyfile(args.source / "LICENSE", args.out / "LICENSE")
    print(f"wrote {target} ({len(schema['apis'])} API keys)")


if __name__ == "__main__":
    main()

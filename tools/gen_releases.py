"""Regenerate dissector/protocol/releases/ from Apache Kafka's message definitions as each
release shipped them.

    python tools/gen_releases.py --git KAFKA_CLONE [--git ANOTHER_CLONE ...]

Each --git is a git directory of apache/kafka or of a fork that carries its release branches
(confluentinc/kafka does); the commits named in SOURCES are looked up in them in turn. For
each release, every `*Request.json` under MESSAGES at that commit gives one API key: its
name and the request versions the release's broker serves (see `served`). The Apache notice,
the LICENSE and a README naming each release's commit are written beside the data.
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.gen_schema import parse_versions  # noqa: E402

OUT_DIR = ROOT / "dissector" / "protocol" / "releases"
LICENSE = ROOT / "dissector" / "protocol" / "definitions" / "LICENSE"
MESSAGES = "clients/src/main/resources/common/message"
# Listeners of a broker's port: a ZooKeeper-mode broker (3.x) or a KRaft broker.
BROKER_LISTENERS = {"zkBroker", "broker"}

# release, release tag, commit, where the commit is and why it stands for the release.
SOURCES = [
    ("3.0", "3.0.0", "8cb0a5e9d3441962896b79163d141607e94d9b54", "apache/kafka tag 3.0.0"),
    ("3.1", "3.1.0", "37edeed0777bacb3dc34e97bc6959bf9d043de2d", "apache/kafka tag 3.1.0"),
    ("3.2", "3.2.0", "38103ffaa962ef5092baffb884c84f8de3568501", "apache/kafka tag 3.2.0"),
    ("3.3", "3.3.0", "9d1f9f77642d7e95dec37647657478ed187bdeb7", "apache/kafka tag 3.3.0"),
    ("3.4", "3.4.0", "2e1947d240607d53f071f61c875cfffc3fec47fe", "apache/kafka tag 3.4.0"),
    ("3.5", "3.5.0", "c97b88d5db4de28d9f51bb11fb71ddd6217c7dda", "apache/kafka tag 3.5.0"),
    ("3.6", "3.6.0", "60e845626d8a465a8cfe68bb2d7d4b88d622634e", "apache/kafka tag 3.6.0"),
    ("3.7", "3.7.0", "2ae524ed625438c5fee89e78648bd73e64a3ada0", "apache/kafka tag 3.7.0"),
    ("3.8", "3.8.0", "771b9576b00ecf5b64ab6e8bedf04156fbdb5cd6", "apache/kafka tag 3.8.0"),
    (
        "3.9",
        "3.9.0",
        "cc53a632edcf78dc8b2a4c2c502c654950744e1e",
        "apache/kafka 3.9 branch, commit 'Bump version to 3.9.0' (2024-11-06), read from "
        "confluentinc/kafka's 3.9 branch; its message definitions are identical to those "
        "of apache/kafka tag 3.9.0-rc3 (dd5272687e8adf9e79e3e329b1b3d2524afb6020)",
    ),
    (
        "4.0",
        "4.0.0",
        "4ae681446f18f9a6d7a59f317013ef82379a4ba4",
        "apache/kafka 4.0 branch, the commit before 'MINOR: Bump to 4.0.1-SNAPSHOT (#19224)' "
        "(2025-03-18, the release's date), read from confluentinc/kafka's 4.0 branch; no "
        "message definition changed on the branch from 2025-03-06 to that commit. Versions "
        "removed by KIP-896 (Produce v0-2, ListOffsets v0, ...) are absent; JoinGroup v0-1, "
        "removed too, came back in 4.0.1 (KAFKA-19444)",
    ),
    (
        "4.1",
        "4.1.0",
        "13f70256db3c994c590e5d262a7cc50b9e973204",
        "apache/kafka 4.1 branch, commit 'Bump version to 4.1.0' (2025-08-27, the last one), "
        "read from confluentinc/kafka's 4.1 branch",
    ),
]

NOTICE = """The release files in this directory hold facts taken from the Apache Kafka protocol
message definitions (clients/src/main/resources/common/message/*Request.json of Apache
Kafka at each release; README.md names the commits): API keys, names and version ranges,
extracted by tools/gen_releases.py.

    Apache Kafka
    Copyright The Apache Software Foundation.

    This product includes software developed at
    The Apache Software Foundation (https://www.apache.org/).

Licensed under the Apache License, Version 2.0 (see LICENSE in this directory).
"""

README = """# Request versions served by each Apache Kafka release

One file per release (`3.0.json` ... `4.1.json`): for every API key a broker of that release
serves, its name and the lowest and highest request version it accepts. Written by
`tools/gen_releases.py` from the `*Request.json` message definitions of Apache Kafka at the
commit below; nothing here is typed by hand.

An API key is kept when its definition lists a broker listener (`zkBroker` or `broker`; a 3.x
broker runs in either mode, so the union is kept). Its range is `validVersions`, less the
newest version when the definition marks it `latestVersionUnstable` (a broker serves it only
with `unstable.api.versions.enable`); a key left with no version, or whose `validVersions`
is `none`, is not served. Features a broker enables by configuration (KIP-848 and KIP-932
groups in early access, client telemetry) are not modelled. A 4.x broker advertises Produce
v0-2 in ApiVersions (KAFKA-18659) but refuses them: the range here is the one it serves.

| release | tag | commit | source |
|---|---|---|---|
{rows}
"""


def strip_comments(text):
    """The definitions are JSON with // comments; no string in them holds "//"."""
    text = re.sub(r"^\s*//.*$", "", text, flags=re.M)
    return re.sub(r"\s//[^\n\"]*$", "", text, flags=re.M)


def served(definition):
    """(api_key, name, min, max) of a request definition, or None when a broker does not
    serve it."""
    listeners = set(definition.get("listeners") or BROKER_LISTENERS)
    versions = parse_versions(definition.get("validVersions"))
    if not listeners & BROKER_LISTENERS or versions is None:
        return None
    low, high = versions
    if definition.get("latestVersionUnstable"):
        high -= 1
    if high < low:
        return None
    return definition["apiKey"], definition["name"].removesuffix("Request"), low, high


def git(gitdir, *args):
    return subprocess.run(
        ["git", "--git-dir", str(gitdir), *args], capture_output=True, text=True, check=True
    ).stdout


def holder(gitdirs, commit):
    """The first git directory that has `commit`."""
    for gitdir in gitdirs:
        probe = ["git", "--git-dir", str(gitdir), "cat-file", "-e", f"{commit}^{{commit}}"]
        if subprocess.run(probe, capture_output=True).returncode == 0:
            return gitdir
    raise SystemExit(f"commit {commit} is in none of: {', '.join(map(str, gitdirs))}")


def release_apis(gitdir, commit):
    names = git(gitdir, "ls-tree", "--name-only", f"{commit}:{MESSAGES}").split()
    apis = []
    for name in names:
        if name.endswith("Request.json"):
            text = git(gitdir, "show", f"{commit}:{MESSAGES}/{name}")
            found = served(json.loads(strip_comments(text)))
            if found:
                apis.append(found)
    return sorted(apis)


def render(release, tag, commit, source, apis):
    """The release file: one API per line, so that a diff between releases reads."""
    lines = [
        f'{{"api_key": {k}, "name": {json.dumps(n)}, "min": {lo}, "max": {hi}}}'
        for k, n, lo, hi in apis
    ]
    head = {"release": release, "tag": tag, "commit": commit, "source": source}
    body = ",\n".join(f"    {line}" for line in lines)
    fields = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in head.items())
    return f'{{\n{fields},\n  "apis": [\n{body}\n  ]\n}}\n'


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--git", type=Path, action="append", required=True)
    ap.add_argument("--out", type=Path, default=OUT_DIR)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for release, tag, commit, source in SOURCES:
        apis = release_apis(holder(args.git, commit), commit)
        (args.out / f"{release}.json").write_text(render(release, tag, commit, source, apis))
        print(f"{release}: {len(apis)} API keys")
    rows = "\n".join(f"| {r} | {t} | `{c}` | {s} |" for r, t, c, s in SOURCES)
    (args.out / "README.md").write_text(README.format(rows=rows))
    (args.out / "NOTICE").write_text(NOTICE)
    shutil.copyfile(LICENSE, args.out / "LICENSE")
    (args.out / "__init__.py").touch()


if __name__ == "__main__":
    main()

"""Every error in a capture, at every level of every response, and every exchange that did
not complete (unanswered, orphan response, malformed) with its reason."""

import re

from ..protocol.errors import error_name
from ._frames import (
    EXCHANGE,
    body,
    frame,
    has,
    ints,
    named_apis,
    per_capture,
    spark_aware,
    topic_names,
    topic_of,
    when,
)

COLUMNS = [
    "time",
    *EXCHANGE,
    "level",
    "topic",
    "partition",
    "resource",
    "member_id",
    "error_code",
    "error_name",
    "error_message",
    "status",
    "reason",
]
#: Statuses that are problems in themselves (an exchange cut short or undecodable).
INCOMPLETE = ("unanswered", "orphan_response", "malformed")
_NONZERO = re.compile(r'ErrorCode":(?!0[,}])')
_TOPIC_LISTS = ("Topics", "Responses", "TopicData", "Results", "ResultsByTopicV3AndBelow")


def _walk(node, context, names, out, depth=0, array_key=""):
    """Depth-first through a body: yields (level, context, code, message) per error code."""
    if isinstance(node, list):
        for item in node:
            _walk(item, context, names, out, depth, array_key)
        return
    if not isinstance(node, dict):
        return
    context = dict(context)
    if array_key in _TOPIC_LISTS or any("Partition" in k for k in node if k != "PartitionIndex"):
        topic = topic_of(node, names)
        if topic:
            context["topic"] = topic
    for key in ("PartitionIndex", "Partition", "Index"):
        if isinstance(node.get(key), int) and "topic" in context:
            context["partition"] = node[key]
            break
    if node.get("ResourceName") is not None:
        context["resource"] = node["ResourceName"]
    if isinstance(node.get("MemberId"), str) and depth > 0:
        context["member_id"] = node["MemberId"]
    for key, value in node.items():
        if key.endswith("ErrorCode") and isinstance(value, int) and value != 0:
            message = node.get(key.replace("ErrorCode", "ErrorMessage")) or node.get("ErrorMessage")
            out.append((_level(context, depth), context, value, message))
    for key, value in node.items():
        if isinstance(value, (list, dict)) and key != "Records":
            _walk(value, context, names, out, depth + 1, key)


def _level(context, depth):
    for level in ("partition", "topic", "resource", "member_id"):
        if level in context:
            return level.removesuffix("_id")
    return "top" if depth == 0 else "nested"


@spark_aware
@per_capture
def errors(pairs):
    """One row per error: every non-zero error code of every response (level `top`,
    `topic`, `partition`, `resource`, `member` or `nested`, with the topic, partition,
    resource and member it belongs to) and one row per unanswered, orphan or malformed
    exchange (level `exchange`, with the reason), in capture order. A Spark DataFrame is
    walked in Spark tasks (`on_spark.errors`)."""
    if not has(pairs, "status"):
        return frame([], COLUMNS)
    names = topic_names(pairs)
    pairs = named_apis(pairs)
    rows = []
    for row in pairs.itertuples(index=False):
        base = {
            "time": when(row),
            **{c: getattr(row, c, None) for c in EXCHANGE},
            "status": row.status,
            "reason": getattr(row, "reason", None),
        }
        if row.status in INCOMPLETE:
            rows.append({**base, "level": "exchange"})
        if isinstance(row.response, str) and not _NONZERO.search(row.response):
            continue  # JSON text with no error code but 0: nothing to walk
        found = []
        _walk(body(row.response), {}, names, found)
        for level, context, code, message in found:
            rows.append(
                {
                    **base,
                    **context,
                    "level": level,
                    "error_code": code,
                    "error_name": error_name(code),
                    "error_message": message,
                }
            )
    return ints(frame(rows, COLUMNS), "partition", "error_code")


@spark_aware
def error_counts(pairs, by=("api_name", "error_name")):
    """How often each error occurs (by API and error name unless told otherwise); counted
    in Spark for a Spark DataFrame."""
    found = errors(pairs)
    by = list(by)
    found = found.assign(error_name=found["error_name"].fillna(found["status"]))
    if found.empty:
        return frame([], [*by, "count"])
    return found.groupby(by, dropna=False).size().rename("count").reset_index()

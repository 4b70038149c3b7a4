"""Generate a Python decoder for one message version from its schema definition.

Each generated decoder is a plain function `decode(buf, pos, ctx) -> (dict, pos)` made of
straight-line struct reads: runs of fixed-width fields become a single `unpack_from`, structs
become nested functions, and tagged fields a dispatch on the tag number. While decoding it
notes in `ctx` what the exchange tables need (topic names, error codes, throttle time, acks,
where record sets lie), so nothing walks the decoded dict afterwards. Which fields carry
which note is `note_kind`, shared with the scan programs of scanner.py, which take the same
notes without building anything.
"""

import struct

from . import primitives
from .schema import in_range

FIXED = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
    "bool": ("?", 1),
    "uuid": ("16s", 16),
}


# Top-level fields noted by name (Context.fields): the session and the tables need them.
TOP_FIELDS = frozenset({"ThrottleTimeMs", "Acks"})


class Context:
    """What a decoder notes on the way: topic names and ids, the top-level and first nested
    error, TOP_FIELDS, and (scanning) where each record set lies, under which topic."""

    __slots__ = (
        "topics",
        "topic_ids",
        "top_error",
        "first_error",
        "records",
        "fields",
        "topic",
        "record_sets",
    )

    def __init__(self, records=None):
        self.topics = []
        self.topic_ids = []
        self.top_error = 0
        self.first_error = 0
        self.records = records or record_set_size
        self.fields = {}
        self.topic = None  # the topic name or id being scanned
        self.record_sets = []  # (topic name or id, start, end) in the scanned buffer

    @property
    def error(self):
        return self.top_error or self.first_error


def record_set_size(raw):
    """Default view of a record set: only its size."""
    return None if raw is None else {"size": len(raw)}


class Layout:
    """Which fields a message version has, and how each is encoded at that version."""

    def __init__(self, flexible, version):
        self.flexible = flexible
        self.version = version

    def present(self, f):
        return in_range(self.version, f["versions"])

    def tagged(self, f):
        return self.flexible and in_range(self.version, f.get("tagged"))

    def nullable(self, f):
        return in_range(self.version, f.get("nullable"))

    def compact(self, f):
        if "flexible" in f:
            return in_range(self.version, f["flexible"])
        return self.flexible

    def fields(self, fields):
        """(regular fields in order, tagged fields) present at this version."""
        present = [f for f in fields if self.present(f)]
        return [f for f in present if not self.tagged(f)], [f for f in present if self.tagged(f)]


def note_kind(f, depth):
    """The note a field carries into a Context, or None: "top_error" and "first_error" (an
    int16 error code at the top level or nested), "field" (TOP_FIELDS), "topic_id",
    "topic" (a topic name) or "topics" (an array of them)."""
    if f["type"] == "int16" and f["name"].endswith("ErrorCode"):
        return "top_error" if depth == 0 else "first_error"
    if depth == 0 and f["name"] in TOP_FIELDS:
        return "field"
    if f["name"] == "TopicId" and f["type"] == "uuid":
        return "topic_id"
    if f.get("topic"):
        if f["type"] == "string":
            return "topic"
        if f["type"] == "[]string":
            return "topics"
    return None


class _Writer(Layout):
    def __init__(self, flexible, version):
        super().__init__(flexible, version)
        self.lines = []
        self.namespace = {
            "i8": primitives.i8,
            "uvarint": primitives.uvarint,
            "string": primitives.string,
            "compact_string": primitives.compact_string,
            "bytes_": primitives.bytes_,
            "compact_bytes": primitives.compact_bytes,
            "array_count": primitives.array_count,
            "too_many": primitives.too_many,
            "uuid_text": primitives.uuid_text,
            "unpack_from": struct.unpack_from,
            "read_tags": read_tags,
        }
        self.count = 0

    def name(self, prefix):
        self.count += 1
        return f"_{prefix}{self.count}"

    def constant(self, prefix, value):
        name = self.name(prefix)
        self.namespace[name] = value
        return name

    # -- functions -------------------------------------------------------------------------

    def struct_function(self, fields, depth):
        """Emit a function decoding a struct's fields at this version; return its name."""
        name = self.name("s")
        body = []
        regular, tagged = self.fields(fields)
        i = 0
        while i < len(regular):
            f = regular[i]
            if f["type"] in FIXED:
                run = []
                while i < len(regular) and regular[i]["type"] in FIXED:
                    run.append(regular[i])
                    i += 1
                body += self.fixed_run(run, depth)
                continue
            if self.container(f):
                # Attached before it is filled: a body cut short keeps what was decoded.
                body += self.read(f, "v", depth, attach=f"d[{f['name']!r}] = v")
            else:
                body += self.read(f, "v", depth)
                body.append(f"d[{f['name']!r}] = v")
            i += 1
        if self.flexible:
            body += self.tag_section(tagged, depth)
        self.lines.append(f"def {name}(buf, pos, ctx, d):")
        self.lines += ["    " + line for line in body]
        self.lines.append("    return pos")
        self.lines.append("")
        return name

    @staticmethod
    def container(f):
        return f["type"] in ("struct", "[]struct")

    # -- field readers ---------------------------------------------------------------------

    def fixed_run(self, run, depth):
        fmt = ">" + "".join(FIXED[f["type"]][0] for f in run)
        size = struct.calcsize(fmt)
        unpack = self.constant("u", struct.Struct(fmt).unpack_from)
        names = [f"x{j}" for j in range(len(run))]
        lines = [f"{', '.join(names)}, = {unpack}(buf, pos)", f"pos += {size}"]
        for var, f in zip(names, run, strict=True):
            if f["type"] == "uuid":
                lines.append(f"{var} = uuid_text({var})")
            lines.append(f"d[{f['name']!r}] = {var}")
            lines += self.notes(f, var, depth)
        return lines

    @staticmethod
    def notes(f, var, depth):
        """Lines that record topic names, error codes and TOP_FIELDS into ctx."""
        kind = note_kind(f, depth)
        if kind == "top_error":
            return [f"if {var}: ctx.top_error = ctx.top_error or {var}"]
        if kind == "first_error":
            return [f"if {var} and not ctx.first_error: ctx.first_error = {var}"]
        if kind == "field":
            return [f"ctx.fields[{f['name']!r}] = {var}"]
        if kind == "topic_id":
            return [f"ctx.topic_ids.append({var})", f"ctx.topic = {var}"]
        if kind == "topic":
            return [f"if {var}: ctx.topics.append({var})", f"ctx.topic = {var}"]
        if kind == "topics":
            return [f"if {var}: ctx.topics.extend(t for t in {var} if t)"]
        return []

    def read(self, f, var, depth, attach=None):
        """Lines that read field f into `var`, advancing pos. attach: a line run once a
        struct's dict or an array's list exists, before it is filled."""
        t = f["type"]
        compact = self.compact(f)
        if t in FIXED:
            code, size = FIXED[t]
            conv = "uuid_text(" + var + ")" if t == "uuid" else var
            unpack = self.constant("u", struct.Struct(">" + code).unpack_from)
            lines = [f"{var}, = {unpack}(buf, pos)", f"pos += {size}"]
            if conv != var:
                lines.append(f"{var} = {conv}")
            return lines + self.notes(f, var, depth)
        if t == "string":
            reader = "compact_string" if compact else "string"
            return [f"{var}, pos = {reader}(buf, pos)"] + self.notes(f, var, depth)
        if t in ("bytes", "records"):
            reader = "compact_bytes" if compact else "bytes_"
            lines = [f"{var}, pos = {reader}(buf, pos)"]
            if t == "records":
                lines.append(f"{var} = ctx.records({var})")
            return lines
        if t == "struct":
            fn = self.struct_function(f["fields"], depth + 1)
            call = [
                f"{var} = {{}}",
                *([attach] if attach else []),
                f"pos = {fn}(buf, pos, ctx, {var})",
            ]
            if self.nullable(f):
                lines = ["(m,), pos = i8(buf, pos), pos + 1", f"if m < 0: {var} = None"]
                if attach:
                    lines.append(f"if m < 0: {attach}")
                return lines + ["else:", *("    " + line for line in call)]
            return call
        if t.startswith("[]"):
            return self.read_array(f, var, depth, compact, attach) + self.notes(f, var, depth)
        raise ValueError(f"unknown field type {t!r} in {f['name']}")

    def read_array(self, f, var, depth, compact, attach=None):
        elem = f["type"][2:]
        if compact:  # a one-byte count (nearly all) inline
            lines = [
                "n = buf[pos]",
                "if n < 128: pos += 1",
                "else: n, pos = uvarint(buf, pos)",
                "n -= 1",
                "if n > len(buf) - pos: too_many(n, buf, pos)",
                f"if n < 0: {var} = None",
            ]
        else:
            lines = ["n, pos = array_count(buf, pos, False)", f"if n is None: {var} = None"]
        if elem == "struct":
            fn = self.struct_function(f["fields"], depth + 1)
            if attach:
                lines.append(f"if {'n < 0' if compact else 'n is None'}: {attach}")
            lines += [
                "else:",
                f"    {var} = []",
                *([f"    {attach}"] if attach else []),
                "    for _ in range(n):",
                "        e = {}",
                f"        {var}.append(e)",
                f"        pos = {fn}(buf, pos, ctx, e)",
            ]
        elif elem in FIXED and elem != "uuid":
            code, size = FIXED[elem]
            lines += [
                "else:",
                f"    {var} = list(unpack_from('>%d{code}' % n, buf, pos))",
                f"    pos += n * {size}",
            ]
        else:
            item = dict(f, type=elem)
            item.pop("topic", None)
            inner = self.read(item, "e", depth + 1)
            lines += ["else:", f"    {var} = []", "    for _ in range(n):"]
            lines += ["        " + line for line in inner]
            lines.append(f"        {var}.append(e)")
        return lines

    def tag_section(self, tagged, depth):
        """Tagged fields: one zero byte in the common case of none, else a table lookup."""
        known = {}
        for f in tagged:
            inner = self.read(dict(f, tagged=None), "v", depth)  # may emit nested functions
            reader = self.name("t")
            self.lines.append(f"def {reader}(buf, pos, ctx):")
            self.lines.append("    v = None")
            self.lines += ["    " + line for line in inner]
            self.lines += ["    return v, pos", ""]
            known[f["tag"]] = (f["name"], reader)
        table = self.name("k")
        entries = ", ".join(f"{tag}: ({name!r}, {fn})" for tag, (name, fn) in known.items())
        self.lines += [f"{table} = {{{entries}}}", ""]
        return [f"if buf[pos]: pos = read_tags(buf, pos, d, ctx, {table})", "else: pos += 1"]


def read_tags(buf, pos, d, ctx, known):
    tags, pos = primitives.tagged_fields(buf, pos)
    for tag, raw in tags.items():
        entry = known.get(tag)
        if entry is None:
            d.setdefault("_unknown_tags", {})[tag] = raw
        else:
            d[entry[0]], _ = entry[1](raw, 0, ctx)
    return pos


def compile_decoder(definition, version):
    """A function decode(buf, pos, ctx, d) -> pos filling the dict d with one version of a
    message."""
    flexible = in_range(version, definition["flexibleVersions"])
    writer = _Writer(flexible, version)
    entry = writer.struct_function(definition["fields"], 0)
    source = "\n".join(writer.lines)
    code = compile(source, f"<{definition['name']} v{version}>", "exec")
    exec(code, writer.namespace)
    decode = writer.namespace[entry]
    decode.source = source
    return decode


def returning_dict(fill):
    """decode(buf, pos, ctx) -> (dict, pos) from a generated fill(buf, pos, ctx, d) -> pos."""

    def decode(buf, pos, ctx):
        d = {}
        return d, fill(buf, pos, ctx, d)

    decode.source = fill.source
    return decode

"""Scan programs: the notes of a body (codegen.Context) without building the body.

A message version compiles once to a program, a tuple of instructions `(opcode, argument)`;
`run(program, buf, pos, ctx)` walks a body as strictly as its decoder reads it, stepping
over what carries no note and taking the notes `codegen.note_kind` names: topic names and
ids, error codes, TOP_FIELDS and where each record set lies. A scan is all that pairing and
the summary need; the body is decoded only when asked for.

One small loop serves every message version. Compiled (scanner.pxd gives it C types) it
reads the buffer as bytes in C; this is the hottest loop of the product, two scans per
exchange.
"""

import struct

from ..errors import DecodeError
from .codegen import FIXED, Layout, note_kind
from .primitives import (
    array_count,
    compact_string,
    skip_bytes,
    string,
    tagged_fields,
    uuid_text,
    uvarint,
)
from .schema import in_range

# Opcodes; the argument each takes.
SKIP = 0  # bytes of fixed-width fields that carry no note
SKIP_STRING = 1  # -: an int16-length string (-1: null)
SKIP_BYTES = 2  # -: int32-length bytes (-1: null)
SKIP_COMPACT = 3  # -: a compact string or compact bytes
TOPIC = 4  # -: an int16-length topic name, noted
TOPIC_COMPACT = 5  # -
RECORDS = 6  # -: int32-length records, noted with the topic they follow
RECORDS_COMPACT = 7  # -
TOPICS = 8  # -: an array of int16-length topic names
TOPICS_COMPACT = 9  # -
TOP_ERROR = 10  # -: an int16 error code of the top level
FIRST_ERROR = 11  # -: an int16 error code further in
FIELD = 12  # (name, struct unpack_from, size): a TOP_FIELDS value
TOPIC_ID = 13  # -: a 16-byte topic id
ARRAY = 14  # program of an element: an int32-counted array (-1: null)
ARRAY_COMPACT = 15  # program of an element: a compact array
ARRAY_FIXED = 16  # element size: an int32-counted array of fixed-width elements
ARRAY_FIXED_COMPACT = 17  # element size
NULLABLE = 18  # program: an int8 presence marker, then the struct if >= 0
TAGS = 19  # {tag: program}: a tagged-field section; unknown tags are stepped over


def compile_program(definition, version):
    """The scan program of one version of a message (or header, or embedded data)."""
    layout = Layout(in_range(version, definition["flexibleVersions"]), version)
    return tuple(_struct(layout, definition["fields"], 0))


def _struct(layout, fields, depth):
    out = []
    regular, tagged = layout.fields(fields)
    for f in regular:
        out += _field(layout, f, depth)
    if layout.flexible:
        table = {f["tag"]: tuple(_field(layout, dict(f, tagged=None), depth)) for f in tagged}
        out.append((TAGS, table))
    # Runs of fixed-width fields with no note are one step.
    merged = []
    for ins in out:
        if ins[0] == SKIP and merged and merged[-1][0] == SKIP:
            merged[-1] = (SKIP, merged[-1][1] + ins[1])
        else:
            merged.append(ins)
    return merged


def _field(layout, f, depth):
    t = f["type"]
    compact = layout.compact(f)
    kind = note_kind(f, depth)
    if t in FIXED:
        size = FIXED[t][1]
        if kind is None:
            return [(SKIP, size)]
        if kind == "field":
            return [(FIELD, (f["name"], struct.Struct(">" + FIXED[t][0]).unpack_from, size))]
        return [({"top_error": TOP_ERROR, "first_error": FIRST_ERROR, "topic_id": TOPIC_ID}[kind],)]
    if t == "string":
        if kind == "topic":
            return [(TOPIC_COMPACT if compact else TOPIC,)]
        return [(SKIP_COMPACT if compact else SKIP_STRING,)]
    if t == "bytes":
        return [(SKIP_COMPACT if compact else SKIP_BYTES,)]
    if t == "records":
        return [(RECORDS_COMPACT if compact else RECORDS,)]
    if t == "struct":
        inner = _struct(layout, f["fields"], depth + 1)
        return [(NULLABLE, tuple(inner))] if layout.nullable(f) else inner
    if t.startswith("[]"):
        elem = t[2:]
        if kind == "topics":
            return [(TOPICS_COMPACT if compact else TOPICS,)]
        if elem == "struct":
            element = _struct(layout, f["fields"], depth + 1)
        elif elem in FIXED:
            return [(ARRAY_FIXED_COMPACT if compact else ARRAY_FIXED, FIXED[elem][1])]
        else:
            item = dict(f, type=elem)
            item.pop("topic", None)
            element = _field(layout, item, depth + 1)
        return [(ARRAY_COMPACT if compact else ARRAY, tuple(element))]
    raise ValueError(f"unknown field type {t!r} in {f['name']}")


def scan(program, buf, pos, ctx):
    """Walk a body with `program` from pos, noting into ctx; the position after it."""
    return run(program, buf if buf.__class__ is bytes else bytes(buf), pos, ctx)


def run(program, buf, pos, ctx):
    """Walk the fields of `program` in buf (bytes) from pos, noting into ctx; the position
    after them. A body cut short raises IndexError (or DecodeError), as its decoder would."""
    p = buf
    end = len(buf)
    for ins in program:
        op = ins[0]
        if op == SKIP:
            pos += ins[1]
            if pos > end:
                raise IndexError
        elif op == SKIP_COMPACT:
            if pos >= end:
                raise IndexError
            n = p[pos]
            if n < 128:
                pos += n or 1  # null (0) is one byte, length n - 1 is n bytes
            else:
                n, pos = uvarint(buf, pos)
                if n:
                    pos += n - 1
            if pos > end:
                raise IndexError
        elif op == TAGS:
            if pos >= end:
                raise IndexError
            if p[pos]:
                pos = _tags(buf, pos, ctx, ins[1])
            else:
                pos += 1
        elif op in (ARRAY_COMPACT, ARRAY):
            if op == ARRAY:
                if pos + 4 > end:
                    raise IndexError
                n = p[pos]  # widened before the shift: 24 bits up overflows a C int
                n = n << 24 | p[pos + 1] << 16 | p[pos + 2] << 8 | p[pos + 3]
                pos += 4
                if n >= 0x80000000:
                    continue  # null, or a negative count taken as null
            else:
                if pos >= end:
                    raise IndexError
                n = p[pos]
                if n < 128:
                    pos += 1
                else:
                    n, pos = uvarint(buf, pos)
                if n == 0:
                    continue  # null
                n -= 1
            if n > end - pos:
                raise DecodeError(f"array of {n} elements cannot fit in {end - pos} bytes", pos)
            element = ins[1]
            for _i in range(n):
                pos = run(element, buf, pos, ctx)
        elif op == SKIP_STRING:
            if pos + 2 > end:
                raise IndexError
            n = p[pos] << 8 | p[pos + 1]
            pos += 2
            if n < 0x8000:
                pos += n
                if pos > end:
                    raise IndexError
        elif TOPIC <= op <= RECORDS_COMPACT:  # a length, then a topic name or record set
            if op == TOPIC:
                if pos + 2 > end:
                    raise IndexError
                n = p[pos] << 8 | p[pos + 1]
                pos += 2
                if n >= 0x8000:
                    n = -1  # null
            elif op == RECORDS:
                if pos + 4 > end:
                    raise IndexError
                n = p[pos]
                n = n << 24 | p[pos + 1] << 16 | p[pos + 2] << 8 | p[pos + 3]
                pos += 4
                if n >= 0x80000000:
                    n = -1
            else:
                if pos >= end:
                    raise IndexError
                n = p[pos]
                if n < 128:
                    pos += 1
                else:
                    n, pos = uvarint(buf, pos)
                n -= 1
            start = pos
            if n > 0:
                pos += n
                if pos > end:
                    raise IndexError
            if op >= RECORDS:
                if n >= 0:
                    ctx.record_sets.append((ctx.topic, start, pos))
            else:
                v = None if n < 0 else p[start:pos].decode("utf-8", "replace")
                if v:
                    ctx.topics.append(v)
                ctx.topic = v
        elif op in (TOP_ERROR, FIRST_ERROR):
            if pos + 2 > end:
                raise IndexError
            n = p[pos] << 8 | p[pos + 1]
            pos += 2
            if n:
                if n >= 0x8000:
                    n -= 0x10000
                if op == TOP_ERROR:
                    if not ctx.top_error:
                        ctx.top_error = n
                elif not ctx.first_error:
                    ctx.first_error = n
        else:
            pos = _rare(ins, buf, pos, ctx)
    return pos


def _rare(ins, buf, pos, ctx):
    """The instructions met once a body at most, or in few messages."""
    op = ins[0]
    end = len(buf)
    if op == FIELD:
        name, unpack, size = ins[1]
        (ctx.fields[name],) = unpack(buf, pos)
        return pos + size
    if op == TOPIC_ID:
        if pos + 16 > end:
            raise IndexError
        v = uuid_text(buf[pos : pos + 16])
        ctx.topic_ids.append(v)
        ctx.topic = v
        return pos + 16
    if op == SKIP_BYTES:
        pos = skip_bytes(buf, pos)
    elif op == NULLABLE:
        if pos >= end:
            raise IndexError
        pos += 1
        if buf[pos - 1] < 0x80:
            return run(ins[1], buf, pos, ctx)
        return pos
    elif op in (ARRAY_FIXED, ARRAY_FIXED_COMPACT):
        n, pos = array_count(buf, pos, op == ARRAY_FIXED_COMPACT)
        if n:
            pos += n * ins[1]
    elif op in (TOPICS, TOPICS_COMPACT):
        n, pos = array_count(buf, pos, op == TOPICS_COMPACT)
        read = compact_string if op == TOPICS_COMPACT else string
        for _ in range(n or 0):
            v, pos = read(buf, pos)
            if v:
                ctx.topics.append(v)
    else:
        raise ValueError(f"unknown scan instruction {ins!r}")
    if pos > end:
        raise IndexError
    return pos


def _tags(buf, pos, ctx, known):
    """A tagged-field section with fields: the known ones are scanned for their notes."""
    tags, pos = tagged_fields(buf, pos)
    for tag, raw in tags.items():
        program = known.get(tag)
        if program is not None:
            run(program, raw, 0, ctx)
    return pos

"""Decode programs: a body as a dict, read by one loop from programs compiled from the schema.

A message version (or header, or embedded data) compiles once to a program, a tuple of
instructions `(opcode, field name, argument)`; `fill(program, buf, pos, ctx, d)` reads the
fields into the dict d in schema order and returns the position after them. On the way it
takes into ctx the notes `codegen.note_kind` names, as the scan programs (scanner.py) do.

A struct or array is put into d before it is filled, so a body cut short keeps what was
decoded. Compiled (decoder.pxd gives it C types), the loop reads lengths and counts from the
bytes in C and builds the dict with C calls.
"""

import struct
from functools import partial

from .codegen import FIXED, Layout, note_kind
from .primitives import (
    array_count,
    bytes_,
    compact_bytes,
    compact_string,
    string,
    tagged_fields,
    uuid_text,
)
from .schema import in_range

# Opcodes; the argument each takes.
RUN = 0  # ((name, uuid?, note) of each field, struct unpack_from, size): fixed-width fields
STRING = 1  # note ("topic" or None): an int16-length string
COMPACT_STRING = 2  # note
BYTES = 3  # -: int32-length bytes
COMPACT_BYTES = 4  # -
RECORDS = 5  # -: int32-length records, given to ctx.records
COMPACT_RECORDS = 6  # -
UUID = 7  # -: an array's 16-byte id (a field's is in a RUN)
STRUCT = 8  # program
NULLABLE = 9  # program: an int8 presence marker, then the struct if >= 0
ARRAY = 10  # (compact?, program of a struct element): an array of structs
ARRAY_FIXED = 11  # (compact?, struct format code, size): an array of fixed-width values
ARRAY_VALUES = 12  # (compact?, instruction reading one value, note): strings, bytes or ids
TAGS = 13  # {tag: program of that one field}: a tagged-field section


def compile_program(definition, version):
    """The decode program of one version of a message (or header, or embedded data)."""
    layout = Layout(in_range(version, definition["flexibleVersions"]), version)
    return _struct(layout, definition["fields"], 0)


def _struct(layout, fields, depth):
    out = []
    regular, tagged = layout.fields(fields)
    run = []  # consecutive fixed-width fields, read by one unpack
    for f in regular:
        if f["type"] in FIXED:
            run.append(f)
            continue
        if run:
            out.append(_run(run, depth))
            run = []
        out.append(_field(layout, f, depth))
    if run:
        out.append(_run(run, depth))
    if layout.flexible:
        table = {}
        for f in tagged:
            f = dict(f, tagged=None)
            one = _run([f], depth) if f["type"] in FIXED else _field(layout, f, depth)
            table[f["tag"]] = (one,)
        out.append((TAGS, None, table))
    return tuple(out)


def _run(fields, depth):
    fmt = ">" + "".join(FIXED[f["type"]][0] for f in fields)
    what = tuple((f["name"], f["type"] == "uuid", note_kind(f, depth)) for f in fields)
    return (RUN, None, (what, struct.Struct(fmt).unpack_from, struct.calcsize(fmt)))


def _field(layout, f, depth):
    t, name = f["type"], f["name"]
    compact = layout.compact(f)
    if t == "string":
        return (COMPACT_STRING if compact else STRING, name, note_kind(f, depth))
    if t == "bytes":
        return (COMPACT_BYTES if compact else BYTES, name, None)
    if t == "records":
        return (COMPACT_RECORDS if compact else RECORDS, name, None)
    if t == "struct":
        program = _struct(layout, f["fields"], depth + 1)
        return (NULLABLE if layout.nullable(f) else STRUCT, name, program)
    if t.startswith("[]"):
        elem = t[2:]
        if elem == "struct":
            return (ARRAY, name, (compact, _struct(layout, f["fields"], depth + 1)))
        if elem in FIXED and elem != "uuid":
            code, size = FIXED[elem]
            return (ARRAY_FIXED, name, (compact, code, size))
        item = dict(f, type=elem)
        item.pop("topic", None)
        one = (UUID, None, None) if elem == "uuid" else _field(layout, item, depth + 1)
        return (ARRAY_VALUES, name, (compact, one, note_kind(f, depth)))
    raise ValueError(f"unknown field type {t!r} in {name}")


def compile_decoder(definition, version):
    """fill(buf, pos, ctx, d) -> pos: decodes one version of a message into the dict d."""
    return partial(fill, compile_program(definition, version))


def returning_dict(fill):
    """decode(buf, pos, ctx) -> (dict, pos) from a fill(buf, pos, ctx, d) -> pos."""

    def decode(buf, pos, ctx):
        d = {}
        return d, fill(buf, pos, ctx, d)

    return decode


def fill(program, buf, pos, ctx, d):
    """Decode the fields of `program` from buf at pos into the dict d; the position after
    them. A body cut short raises struct.error, IndexError or DecodeError."""
    return run(program, buf if buf.__class__ is bytes else bytes(buf), pos, ctx, d)


def run(program, buf, pos, ctx, d):
    for ins in program:
        op = ins[0]
        if op == RUN:
            what, unpack, size = ins[2]
            values = unpack(buf, pos)
            pos += size
            for (name, is_uuid, note), v in zip(what, values, strict=True):
                if is_uuid:
                    v = uuid_text(v)
                d[name] = v
                if note is not None:
                    _note(ctx, note, name, v)
        elif op in (COMPACT_STRING, STRING):
            v, pos = compact_string(buf, pos) if op == COMPACT_STRING else string(buf, pos)
            d[ins[1]] = v
            if ins[2] is not None:  # a topic name
                if v:
                    ctx.topics.append(v)
                ctx.topic = v
        elif op == ARRAY:
            n, pos = array_count(buf, pos, ins[2][0])
            if n is None:
                d[ins[1]] = None
                continue
            items = []
            d[ins[1]] = items
            element = ins[2][1]
            for _i in range(n):
                e = {}
                items.append(e)
                pos = run(element, buf, pos, ctx, e)
        elif op == TAGS:
            if buf[pos]:
                pos = _tags(buf, pos, ctx, d, ins[2])
            else:
                pos += 1
        elif op == STRUCT:
            e = {}
            d[ins[1]] = e
            pos = run(ins[2], buf, pos, ctx, e)
        else:
            v, pos = _value(ins, buf, pos, ctx, d)
            d[ins[1]] = v
    return pos


def _value(ins, buf, pos, ctx, d):
    """(value, position after it) of the instructions that read one value (a nullable
    struct is put into d before it is filled)."""
    op = ins[0]
    if op in (COMPACT_BYTES, BYTES):
        return compact_bytes(buf, pos) if op == COMPACT_BYTES else bytes_(buf, pos)
    if op in (COMPACT_RECORDS, RECORDS):
        raw, pos = compact_bytes(buf, pos) if op == COMPACT_RECORDS else bytes_(buf, pos)
        return ctx.records(raw), pos
    if op in (COMPACT_STRING, STRING):
        return compact_string(buf, pos) if op == COMPACT_STRING else string(buf, pos)
    if op == UUID:
        if pos + 16 > len(buf):
            raise IndexError
        return uuid_text(buf[pos : pos + 16]), pos + 16
    if op == NULLABLE:
        if buf[pos] >= 0x80:  # an int8 below zero: null
            return None, pos + 1
        e = {}
        d[ins[1]] = e
        return e, run(ins[2], buf, pos + 1, ctx, e)
    if op == ARRAY_FIXED:
        compact, code, size = ins[2]
        n, pos = array_count(buf, pos, compact)
        if n is None:
            return None, pos
        return list(struct.unpack_from(f">{n}{code}", buf, pos)), pos + n * size
    if op == ARRAY_VALUES:
        compact, one, note = ins[2]
        n, pos = array_count(buf, pos, compact)
        if n is None:
            return None, pos
        items = []
        for _i in range(n):
            v, pos = _value(one, buf, pos, ctx, None)
            items.append(v)
        if note is not None and items:  # topic names
            ctx.topics.extend(t for t in items if t)
        return items, pos
    raise ValueError(f"unknown decode instruction {ins!r}")


def _note(ctx, note, name, v):
    """A note of a fixed-width field (codegen.note_kind)."""
    if note == "top_error":
        if v and not ctx.top_error:
            ctx.top_error = v
    elif note == "first_error":
        if v and not ctx.first_error:
            ctx.first_error = v
    elif note == "field":
        ctx.fields[name] = v
    elif note == "topic_id":
        ctx.topic_ids.append(v)
        ctx.topic = v


def _tags(buf, pos, ctx, d, known):
    """A tagged-field section with fields: known ones decoded into d, others kept raw."""
    tags, pos = tagged_fields(buf, pos)
    for tag, raw in tags.items():
        program = known.get(tag)
        if program is None:
            d.setdefault("_unknown_tags", {})[tag] = raw
        else:
            run(program, raw, 0, ctx, d)
    return pos

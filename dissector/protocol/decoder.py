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
from .primitives import past_end, read_length, tagged_fields, too_many, uuid_text
from .schema import in_range

# Opcodes; the argument each takes.
RUN = 0  # (struct unpack_from, size, [(index, uuid?, note)] or None): fixed-width fields
TAGS = 1  # {tag: program of that one field}: a tagged-field section
STRUCT = 2  # program
NULLABLE = 3  # program: an int8 presence marker, then the struct if >= 0
UUID = 4  # -: an array's 16-byte id (a field's is in a RUN)

# Fields that start with a length or a count: the opcode is one of these kinds plus how that
# number is encoded (primitives.I16, I32 or VAR), which primitives.read_length reads for all.
SIZED = 8  # the first kind
STRING = 8  # note ("topic" or None)
BYTES = 12  # -
RECORDS = 16  # -: records, given to ctx.records
ARRAY = 20  # program of a struct element
ARRAY_FIXED = 24  # (struct format code, size): an array of fixed-width values
ARRAY_VALUES = 28  # (program of one value, note): strings, bytes or ids

# The opcodes by name, for other readers of these programs (tables/body_text.pyx): compiled,
# the names above are C constants, not attributes of the module.
OPCODES = {
    "RUN": RUN,
    "TAGS": TAGS,
    "STRUCT": STRUCT,
    "NULLABLE": NULLABLE,
    "UUID": UUID,
    "SIZED": SIZED,
    "STRING": STRING,
    "BYTES": BYTES,
    "RECORDS": RECORDS,
    "ARRAY": ARRAY,
    "ARRAY_FIXED": ARRAY_FIXED,
    "ARRAY_VALUES": ARRAY_VALUES,
}


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
    names = tuple(f["name"] for f in fields)
    # The fields that need more than a place in the dict: ids become text, notes are taken.
    special = tuple(
        (i, f["type"] == "uuid", note_kind(f, depth))
        for i, f in enumerate(fields)
        if f["type"] == "uuid" or note_kind(f, depth) is not None
    )
    s = struct.Struct(fmt)
    return (RUN, names, (s.unpack_from, s.size, special or None))


def _field(layout, f, depth):
    t, name = f["type"], f["name"]
    width = layout.width(f)
    if t == "string":
        return (STRING + width, name, note_kind(f, depth))
    if t == "bytes":
        return (BYTES + width, name, None)
    if t == "records":
        return (RECORDS + width, name, None)
    if t == "struct":
        program = _struct(layout, f["fields"], depth + 1)
        return (NULLABLE if layout.nullable(f) else STRUCT, name, program)
    if t.startswith("[]"):
        elem = t[2:]
        if elem == "struct":
            return (ARRAY + width, name, _struct(layout, f["fields"], depth + 1))
        if elem in FIXED and elem != "uuid":
            return (ARRAY_FIXED + width, name, FIXED[elem])
        item = dict(f, type=elem)
        item.pop("topic", None)
        one = (UUID, None, None) if elem == "uuid" else _field(layout, item, depth + 1)
        return (ARRAY_VALUES + width, name, ((one,), note_kind(f, depth)))
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
    p = buf
    end = len(buf)
    for ins in program:
        op = ins[0]
        if op >= SIZED:
            width = op & 3  # how the length or count, n, is encoded; -1 for null
            n, pos = read_length(buf, pos, end, width)
            kind = op - width
            if kind <= RECORDS:  # n bytes
                if n < 0:
                    v = None
                else:
                    start = pos
                    pos += n
                    if pos > end:
                        raise past_end("string" if kind == STRING else "bytes", n, start)
                    text = kind == STRING
                    v = p[start:pos].decode("utf-8", "replace") if text else p[start:pos]
                if kind == STRING:
                    d[ins[1]] = v
                    if ins[2] is not None:  # a topic name
                        if v:
                            ctx.topics.append(v)
                        ctx.topic = v
                elif kind == RECORDS:
                    d[ins[1]] = ctx.records(v, ctx)
                else:
                    d[ins[1]] = v
            elif n < 0:
                d[ins[1]] = None
            else:  # n elements
                if n > end - pos:
                    raise too_many(n, end, pos)
                if kind == ARRAY:
                    items = []
                    d[ins[1]] = items
                    element = ins[2]
                    for _i in range(n):
                        e = {}
                        items.append(e)
                        pos = run(element, buf, pos, ctx, e)
                elif kind == ARRAY_FIXED:
                    code, size = ins[2]
                    d[ins[1]] = list(struct.unpack_from(f">{n}{code}", buf, pos))
                    pos += n * size
                else:
                    pos = _values(ins, n, buf, pos, ctx, d)
        elif op == RUN:
            names = ins[1]
            unpack, size, special = ins[2]
            values = unpack(buf, pos)
            pos += size
            for i in range(len(names)):
                d[names[i]] = values[i]
            if special is not None:
                for i, is_uuid, note in special:
                    v = values[i]
                    if is_uuid:
                        v = d[names[i]] = uuid_text(v)
                    if note is not None:
                        _note(ctx, note, names[i], v)
        elif op == STRUCT:
            e = {}
            d[ins[1]] = e
            pos = run(ins[2], buf, pos, ctx, e)
        elif op == TAGS:
            if pos >= end:
                raise IndexError
            if p[pos]:
                pos = _tags(buf, pos, ctx, d, ins[2])
            else:
                pos += 1
        elif op == NULLABLE:
            if pos >= end:
                raise IndexError
            if p[pos] >= 0x80:  # an int8 below zero: null
                d[ins[1]] = None
                pos += 1
            else:
                e = {}
                d[ins[1]] = e
                pos = run(ins[2], buf, pos + 1, ctx, e)
        elif op == UUID:
            if pos + 16 > end:
                raise IndexError
            d[ins[1]] = uuid_text(p[pos : pos + 16])
            pos += 16
        else:
            raise ValueError(f"unknown decode instruction {ins!r}")
    return pos


def _values(ins, n, buf, pos, ctx, d):
    """An array of n strings, bytes or ids into d; the position after it."""
    one, note = ins[2]
    items = []
    d[ins[1]] = items
    value = {}  # each element is read into value[key]
    key = one[0][1]
    for _i in range(n):
        pos = run(one, buf, pos, ctx, value)
        items.append(value[key])
    if note is not None and items:  # topic names
        ctx.topics.extend(t for t in items if t)
    return pos


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

"""Scan programs: the notes of a body (codegen.Context) without building the body.

A message version compiles once to a program, a tuple of instructions `(opcode, argument)`;
`run(program, buf, pos, ctx)` walks a body as strictly as its decoder reads it, stepping
over what carries no note and taking the notes `codegen.note_kind` names: topic names and
ids, error codes, TOP_FIELDS and where each record set lies, under which topic and partition.
A scan is all that pairing, the summary and the records table need; the body is decoded only
when asked for.

One small loop serves every message version. Compiled (scanner.pxd gives it C types) it
reads the buffer as bytes in C; this is the hottest loop of the product, two scans per
exchange.
"""

from .codegen import FIXED, Layout, note_kind
from .primitives import past_end, read_length, tagged_fields, too_many, uuid_text
from .schema import in_range

# Opcodes of fields with no length; the argument each takes.
SKIP = 0  # bytes of fixed-width fields that carry no note
TAGS = 1  # {tag: program}: a tagged-field section; unknown tags are stepped over
TOP_ERROR = 2  # -: an int16 error code of the top level
FIRST_ERROR = 3  # -: an int16 error code further in
FIELD = 4  # (name, size, 2 ** (8 * size - 1)): a TOP_FIELDS value, a signed integer
TOPIC_ID = 5  # -: a 16-byte topic id
NULLABLE = 6  # program: an int8 presence marker, then the struct if >= 0
PARTITION = 7  # -: the int32 partition index of a struct that holds a record set
# Of the programs compiled with `assigned=True` only: a Produce response's partition, its
# int16 error code and the int64 base offset after it, into ctx.assigned (what the broker
# gave the records the request sent there; see tables/records.py).
ASSIGNED = -1

# Fields that start with a length or a count: the opcode is one of these kinds plus how that
# number is encoded (primitives.I16, I32 or VAR), which primitives.read_length reads for all.
SIZED = 8  # the first kind
STEP = 8  # -: bytes or a string that carry no note
TOPIC = 12  # -: a topic name, noted
RECORDS = 16  # -: records, noted with the topic they follow
ARRAY = 20  # program of an element: an array of them
ARRAY_FIXED = 24  # element size: an array of fixed-width elements
TOPICS = 28  # how each name's length is encoded: an array of topic names


def compile_program(definition, version, assigned=False):
    """The scan program of one version of a message (or header, or embedded data).
    `assigned`: its partitions' base offsets noted too (ASSIGNED)."""
    layout = Layout(in_range(version, definition["flexibleVersions"]), version)
    return tuple(_struct(layout, definition["fields"], 0, assigned))


# The partition index beside a record set (ProduceRequest's Index, FetchResponse's
# PartitionIndex), noted so that a record set is known by topic and partition unread.
_PARTITION_NAMES = ("Index", "PartitionIndex", "Partition")


def _struct(layout, fields, depth, assigned=False):
    out = []
    regular, tagged = layout.fields(fields)
    holds_records = any(f["type"] == "records" for f in regular)
    offsets = assigned and _gives_offsets(regular)
    for f in regular:
        if (holds_records or offsets) and f["name"] in _PARTITION_NAMES and f["type"] == "int32":
            out.append((PARTITION,))
        elif offsets and f["name"] == "ErrorCode":
            out.append((ASSIGNED,))  # the error code and the base offset after it
        elif not (offsets and f["name"] == "BaseOffset"):
            out += _field(layout, f, depth, assigned)
    if layout.flexible:
        table = {
            f["tag"]: tuple(_field(layout, dict(f, tagged=None), depth, assigned)) for f in tagged
        }
        out.append((TAGS, table))
    # Runs of fixed-width fields with no note are one step.
    merged = []
    for ins in out:
        if ins[0] == SKIP and merged and merged[-1][0] == SKIP:
            merged[-1] = (SKIP, merged[-1][1] + ins[1])
        else:
            merged.append(ins)
    return merged


def _gives_offsets(fields):
    """Whether a struct is a Produce response's partition, whose ASSIGNED reads its int16
    ErrorCode and the int64 BaseOffset right after it (as every version the schema has)."""
    kinds = [(f["name"], f["type"]) for f in fields]
    if ("BaseOffset", "int64") not in kinds:
        return False
    at = kinds.index(("BaseOffset", "int64"))
    if at == 0 or kinds[at - 1] != ("ErrorCode", "int16"):
        raise ValueError("a base offset not right after an int16 ErrorCode")
    return True


def _field(layout, f, depth, assigned=False):
    t = f["type"]
    kind = note_kind(f, depth)
    if t in FIXED:
        size = FIXED[t][1]
        if kind is None:
            return [(SKIP, size)]
        if kind == "field":
            if t not in ("int8", "int16", "int32"):
                raise ValueError(f"noted field {f['name']} is {t}, not an int8, int16 or int32")
            return [(FIELD, (f["name"], size, 1 << (8 * size - 1)))]
        return [({"top_error": TOP_ERROR, "first_error": FIRST_ERROR, "topic_id": TOPIC_ID}[kind],)]
    # The encoding of the length or count of everything else.
    width = layout.width(f)
    if t == "string":
        return [((TOPIC if kind == "topic" else STEP) + width,)]
    if t == "bytes":
        return [(STEP + width,)]
    if t == "records":
        return [(RECORDS + width,)]
    if t == "struct":
        inner = _struct(layout, f["fields"], depth + 1, assigned)
        return [(NULLABLE, tuple(inner))] if layout.nullable(f) else inner
    if t.startswith("[]"):
        elem = t[2:]
        if kind == "topics":
            return [(TOPICS + width, layout.width(dict(f, type=elem)))]
        if elem == "struct":
            element = _struct(layout, f["fields"], depth + 1, assigned)
        elif elem in FIXED:
            return [(ARRAY_FIXED + width, FIXED[elem][1])]
        else:
            item = dict(f, type=elem)
            item.pop("topic", None)
            element = _field(layout, item, depth + 1)
        return [(ARRAY + width, tuple(element))]
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
            step = ins[1]  # a C integer when compiled: pos is not boxed to add it
            pos += step
            if pos > end:
                raise IndexError
        elif op >= SIZED:
            width = op & 3  # how the length or count, n, is encoded; -1 for null
            n, pos = read_length(buf, pos, end, width)
            kind = op - width
            if kind <= RECORDS:  # n bytes
                start = pos
                if n > 0:
                    pos += n
                    if pos > end:
                        raise IndexError
                if kind == RECORDS:
                    if n >= 0:
                        ctx.record_sets.append((ctx.topic, ctx.partition, start, pos))
                elif kind == TOPIC:
                    v = None if n < 0 else p[start:pos].decode("utf-8", "replace")
                    if v:
                        ctx.topics.append(v)
                    ctx.topic = v
            elif n >= 0:  # n elements
                if n > end - pos:
                    raise too_many(n, end, pos)
                if kind == ARRAY:
                    element = ins[1]
                    for _i in range(n):
                        pos = run(element, buf, pos, ctx)
                elif kind == ARRAY_FIXED:
                    step = ins[1]
                    pos += n * step
                    if pos > end:
                        raise IndexError
                else:  # topic names
                    for _i in range(n):
                        k, pos = read_length(buf, pos, end, ins[1])
                        if k > 0:
                            start = pos
                            pos += k
                            if pos > end:
                                raise past_end("string", k, start)
                            ctx.topics.append(p[start:pos].decode("utf-8", "replace"))
        elif op == TAGS:
            if pos >= end:
                raise IndexError
            if p[pos]:
                pos = _tags(buf, pos, ctx, ins[1])
            else:
                pos += 1
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
        elif op == FIELD:  # big-endian; at `half` and above, negative
            name, size, half = ins[1]
            if pos + size > end:
                raise IndexError
            n = 0
            for _i in range(size):
                n = n << 8 | p[pos + _i]
            if n >= half:
                n -= 2 * half
            ctx.fields[name] = n
            pos += size
        else:
            pos = _rare(ins, buf, pos, ctx)
    return pos


def _rare(ins, buf, pos, ctx):
    """The instructions met once a body at most, or in few messages."""
    op = ins[0]
    if op == TOPIC_ID:
        if pos + 16 > len(buf):
            raise IndexError
        v = uuid_text(buf[pos : pos + 16])
        ctx.topic_ids.append(v)
        ctx.topic = v
        return pos + 16
    if op == PARTITION:
        if pos + 4 > len(buf):
            raise IndexError
        n = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
        ctx.partition = n
        return pos + 4
    if op == ASSIGNED:
        if pos + 10 > len(buf):
            raise IndexError
        error = int.from_bytes(buf[pos : pos + 2], "big", signed=True)
        base = int.from_bytes(buf[pos + 2 : pos + 10], "big", signed=True)
        if base >= 0 and not error:
            ctx.assigned[ctx.topic, ctx.partition] = base
        return pos + 10
    if op == NULLABLE:
        if buf[pos] < 0x80:  # an int8 below zero: null
            return run(ins[1], buf, pos + 1, ctx)
        return pos + 1
    raise ValueError(f"unknown scan instruction {ins!r}")


def _tags(buf, pos, ctx, known):
    """A tagged-field section with fields: the known ones are scanned for their notes."""
    tags, pos = tagged_fields(buf, pos)
    for tag, raw in tags.items():
        program = known.get(tag)
        if program is not None:
            run(program, raw, 0, ctx)
    return pos

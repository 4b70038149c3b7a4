"""A Kafka message encoder for the tests, interpreting the schema data at run time.

It shares nothing with the generated decoders but the schema data itself: it walks a message
definition field by field, so a roundtrip through `encode` and the decoder checks one reading
of the schema against another.

Values are dicts keyed by the schema's field names, in the form the decoder produces
(uuids as URL-safe base64 text, record sets as {"size": n}), with a few conveniences:

* a uuid may also be given as 16 raw bytes, a record set as raw bytes;
* a regular field missing from the dict is written with its default (0, "", empty array,
  null for nullable structs and record sets);
* a tagged field missing from the dict is not written;
* "_unknown_tags": {tag: bytes} is written verbatim into the struct's tagged-field section.

`expected_form` gives what the decoder should return for such a value; `encode_with_notes`
also gives the topic names and error codes the decoder should note in its context.
"""

import base64
import json
import struct
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

OPEN = 32767
API_VERSIONS = 18
CONTROLLED_SHUTDOWN = 7

# type -> (struct format, lowest, highest)
INTEGERS = {
    "int8": (">b", -(2**7), 2**7 - 1),
    "int16": (">h", -(2**15), 2**15 - 1),
    "uint16": (">H", 0, 2**16 - 1),
    "int32": (">i", -(2**31), 2**31 - 1),
    "int64": (">q", -(2**63), 2**63 - 1),
}

# Characters of random strings: ASCII, two- three- and four-byte UTF-8, a NUL.
ALPHABET = list("abcxyzABCXYZ019._- ") + ["é", "ß", "ü", "€", "日", "本", "🦀", "\x00"]


# -- the schema data -----------------------------------------------------------------------


@cache
def schema_data():
    files = resources.files("dissector.protocol.definitions")
    return json.loads(files.joinpath("kafka_messages.json").read_text(encoding="utf-8"))


def in_range(version, rng):
    return rng is not None and rng[0] <= version <= rng[1]


def definition_of(api_key, kind, version):
    """The request or response definition covering a version (the first that does)."""
    api = schema_data()["apis"].get(str(api_key))
    for definition in api[kind] if api else ():
        if in_range(version, definition["validVersions"]):
            return definition
    return None


def all_message_versions():
    """Every (api_key, api name, kind, version) the schema data describes."""
    out = []
    for key, api in schema_data()["apis"].items():
        for kind in ("request", "response"):
            versions = set()
            for definition in api[kind]:
                lo, hi = definition["validVersions"]
                versions.update(range(lo, hi + 1))
            out += [(int(key), api["name"], kind, v) for v in sorted(versions)]
    return out


def is_flexible(definition, version):
    return in_range(version, definition["flexibleVersions"])


def request_header_version(api_key, version):
    if api_key == CONTROLLED_SHUTDOWN and version == 0:
        return 0
    return 2 if is_flexible(definition_of(api_key, "request", version), version) else 1


def response_header_version(api_key, version):
    if api_key == API_VERSIONS:
        return 0
    return 1 if is_flexible(definition_of(api_key, "response", version), version) else 0


# -- wire primitives -----------------------------------------------------------------------


def uvarint(n):
    """Unsigned varint (7 bits a byte, least significant group first)."""
    if n < 0:
        raise ValueError(f"unsigned varint of a negative number {n}")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def varint(n):
    """Zig-zag signed 32-bit varint."""
    if not -(2**31) <= n < 2**31:
        raise ValueError(f"{n} does not fit a varint")
    return uvarint(((n << 1) ^ (n >> 31)) & 0xFFFFFFFF)


def varlong(n):
    """Zig-zag signed 64-bit varint."""
    if not -(2**63) <= n < 2**63:
        raise ValueError(f"{n} does not fit a varlong")
    return uvarint(((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


def uuid_to_text(raw):
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def uuid_to_raw(value):
    if isinstance(value, str):
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    else:
        raw = bytes(value)
    if len(raw) != 16:
        raise ValueError(f"a uuid is 16 bytes, not {len(raw)}")
    return raw


def filler(n):
    """n arbitrary bytes standing for a record set."""
    return bytes((i * 151 + 7) & 0xFF for i in range(n))


def length_prefixed(data, compact, wide):
    """A string (int16 length) or bytes (int32 length) value, or null when data is None."""
    if compact:
        return uvarint(0) if data is None else uvarint(len(data) + 1) + data
    fmt = ">i" if wide else ">h"
    return struct.pack(fmt, -1) if data is None else struct.pack(fmt, len(data)) + data


def array_prefix(count, compact):
    if compact:
        return uvarint(0 if count is None else count + 1)
    return struct.pack(">i", -1 if count is None else count)


def tag_section(tags):
    """The tagged-field section of a struct from {tag: encoded field}, sorted by tag."""
    out = bytearray(uvarint(len(tags)))
    for tag in sorted(tags):
        out += uvarint(tag) + uvarint(len(tags[tag])) + tags[tag]
    return bytes(out)


# -- the schema walk -----------------------------------------------------------------------


@dataclass
class Notes:
    """What the decoder should note while decoding: topic names and error codes, in order."""

    topics: list = field(default_factory=list)
    top_error: int = 0
    first_error: int = 0

    @property
    def error(self):
        return self.top_error or self.first_error


class _Walk:
    """Encodes a value at one version, building the decoded form and the notes on the way."""

    def __init__(self, version, flexible):
        self.version = version
        self.flexible = flexible
        self.notes = Notes()

    def present(self, f):
        return in_range(self.version, f["versions"])

    def tagged(self, f):
        return self.flexible and in_range(self.version, f.get("tagged"))

    def nullable(self, f):
        return in_range(self.version, f.get("nullable"))

    def compact(self, f):
        return in_range(self.version, f["flexible"]) if "flexible" in f else self.flexible

    def struct(self, fields, value, depth):
        """(bytes, decoded dict) of a struct's fields."""
        value = dict(value)
        unknown = value.pop("_unknown_tags", None) or {}
        out = bytearray()
        decoded = {}
        tagged = []
        for f in fields:
            if not self.present(f):
                continue
            if self.tagged(f):
                tagged.append(f)
                continue
            v = value.pop(f["name"]) if f["name"] in value else self.default(f)
            raw, decoded[f["name"]] = self.field(f, v, depth)
            out += raw
        tags = {}
        for f in sorted(tagged, key=lambda f: f["tag"]):
            if f["name"] in value:
                tags[f["tag"]], decoded[f["name"]] = self.field(f, value.pop(f["name"]), depth)
        if value:
            raise ValueError(f"no field {sorted(value)} at version {self.version}")
        if self.flexible:
            clash = set(tags) & set(unknown)
            if clash:
                raise ValueError(f"unknown tags {sorted(clash)} are known tags")
            tags.update(unknown)
            if unknown:
                decoded["_unknown_tags"] = {tag: bytes(raw) for tag, raw in unknown.items()}
            out += tag_section(tags)
        elif unknown:
            raise ValueError("tagged fields in a version that is not flexible")
        return bytes(out), decoded

    def default(self, f):
        t = f["type"]
        if t in INTEGERS:
            return 0
        if t == "float64":
            return 0.0
        if t == "bool":
            return False
        if t == "uuid":
            return bytes(16)
        if t == "string":
            return ""
        if t == "bytes":
            return b""
        if t == "records":
            return None if self.nullable(f) else {"size": 0}
        if t == "struct":
            return None if self.nullable(f) else {}
        return []

    def field(self, f, v, depth):
        """(bytes, decoded value) of one field."""
        t = f["type"]
        if v is None and not self.nullable(f):
            raise ValueError(f"{f['name']} is not nullable at version {self.version}")
        raw, decoded = self.value(t, f, v, depth)
        self.note(f, decoded, depth)
        return raw, decoded

    def value(self, t, f, v, depth):
        compact = self.compact(f)
        if t in INTEGERS:
            fmt, lo, hi = INTEGERS[t]
            if not (isinstance(v, int) and lo <= v <= hi):
                raise ValueError(f"{f['name']}: {v!r} is not a {t}")
            return struct.pack(fmt, v), v
        if t == "float64":
            return struct.pack(">d", v), float(v)
        if t == "bool":
            return (b"\x01" if v else b"\x00"), bool(v)
        if t == "uuid":
            raw = uuid_to_raw(v)
            return raw, uuid_to_text(raw)
        if t == "string":
            data = None if v is None else v.encode("utf-8")
            return length_prefixed(data, compact, wide=False), v
        if t == "bytes":
            data = None if v is None else bytes(v)
            return length_prefixed(data, compact, wide=True), data
        if t == "records":
            if v is None:
                data = None
            elif isinstance(v, dict):
                data = filler(v["size"])
            else:
                data = bytes(v)
            decoded = None if data is None else {"size": len(data)}
            return length_prefixed(data, compact, wide=True), decoded
        if t == "struct":
            if not self.nullable(f):
                return self.struct(f["fields"], v, depth + 1)
            if v is None:
                return struct.pack(">b", -1), None
            raw, decoded = self.struct(f["fields"], v, depth + 1)
            return struct.pack(">b", 1) + raw, decoded
        if t.startswith("[]"):
            if v is None:
                return array_prefix(None, compact), None
            elem = t[2:]
            out = bytearray(array_prefix(len(v), compact))
            decoded = []
            for e in v:
                if elem == "struct":
                    raw, d = self.struct(f["fields"], e, depth + 1)
                else:
                    raw, d = self.value(elem, f, e, depth + 1)
                out += raw
                decoded.append(d)
            return bytes(out), decoded
        raise ValueError(f"unknown field type {t!r} in {f['name']}")

    def note(self, f, decoded, depth):
        if f["type"] == "int16" and f["name"].endswith("ErrorCode") and decoded:
            if depth == 0:
                self.notes.top_error = self.notes.top_error or decoded
            elif not self.notes.first_error:
                self.notes.first_error = decoded
        if f.get("topic") and decoded:
            if f["type"] == "string":
                self.notes.topics.append(decoded)
            elif f["type"] == "[]string":
                self.notes.topics += [t for t in decoded if t]


def encode_with_notes(definition, version, value):
    """(bytes, expected decoded form, Notes) of a value at a version of a definition."""
    walk = _Walk(version, is_flexible(definition, version))
    raw, decoded = walk.struct(definition["fields"], value, 0)
    return raw, decoded, walk.notes


def encode(definition, version, value):
    """The wire bytes of a message body (or header) at a version."""
    return encode_with_notes(definition, version, value)[0]


def expected_form(definition, version, value):
    """The dict the decoder should produce for the encoding of value."""
    return encode_with_notes(definition, version, value)[1]


def encode_request_header(api_key, version, correlation_id, client_id, tags=None):
    header = schema_data()["headers"]["RequestHeader"]
    value = {
        "RequestApiKey": api_key,
        "RequestApiVersion": version,
        "CorrelationId": correlation_id,
    }
    hv = request_header_version(api_key, version)
    if hv >= 1:
        value["ClientId"] = client_id
    if tags:
        value["_unknown_tags"] = tags
    return encode(header, hv, value)


def encode_response_header(api_key, version, correlation_id, tags=None):
    header = schema_data()["headers"]["ResponseHeader"]
    value = {"CorrelationId": correlation_id}
    if tags:
        value["_unknown_tags"] = tags
    return encode(header, response_header_version(api_key, version), value)


def encode_request(api_key, version, correlation_id, client_id, body, header_tags=None):
    """Header and body of a request frame, without the 4-byte size prefix."""
    head = encode_request_header(api_key, version, correlation_id, client_id, header_tags)
    return head + encode(definition_of(api_key, "request", version), version, body)


def encode_response(api_key, version, correlation_id, body, header_tags=None):
    """Header and body of a response frame, without the 4-byte size prefix."""
    head = encode_response_header(api_key, version, correlation_id, header_tags)
    return head + encode(definition_of(api_key, "response", version), version, body)


# -- random values -------------------------------------------------------------------------


class _Random:
    def __init__(self, version, flexible, rng, unknown_tags):
        self.walk = _Walk(version, flexible)
        self.rng = rng
        self.unknown_tags = unknown_tags

    def struct(self, fields, depth):
        w, rng = self.walk, self.rng
        value = {}
        for f in fields:
            if not w.present(f) or (w.tagged(f) and rng.random() < 0.5):
                continue
            value[f["name"]] = self.field(f, depth)
        if w.flexible and self.unknown_tags and rng.random() < 0.15:
            known = {f["tag"] for f in fields if "tag" in f}
            tags = [t for t in rng.sample(range(40), 3) if t not in known][: rng.randint(1, 2)]
            if tags:
                value["_unknown_tags"] = {t: rng.randbytes(rng.randint(0, 5)) for t in tags}
        return value

    def field(self, f, depth):
        if self.walk.nullable(f) and self.rng.random() < 0.2:
            return None
        return self.value(f["type"], f, depth)

    def value(self, t, f, depth):
        rng = self.rng
        if t in INTEGERS:
            _, lo, hi = INTEGERS[t]
            return rng.choice([lo, hi, 0, 1, max(lo, -1), rng.randint(lo, hi), rng.randint(0, 99)])
        if t == "float64":
            return rng.choice([0.0, -1.5, 1e300, -2.5e-300, rng.uniform(-1e9, 1e9)])
        if t == "bool":
            return rng.random() < 0.5
        if t == "uuid":
            return uuid_to_text(rng.randbytes(16))
        if t == "string":
            return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 10)))
        if t == "bytes":
            return rng.randbytes(rng.randint(0, 8))
        if t == "records":
            return {"size": rng.randint(0, 40)}
        if t == "struct":
            return self.struct(f["fields"], depth + 1)
        if t.startswith("[]"):
            elem = t[2:]
            if elem == "struct":
                return [self.struct(f["fields"], depth + 1) for _ in range(rng.randint(0, 3))]
            return [self.value(elem, f, depth + 1) for _ in range(rng.randint(0, 3))]
        raise ValueError(f"unknown field type {t!r} in {f['name']}")


def random_value(definition, version, rng, unknown_tags=False):
    """A random value for every field of a definition at a version.

    Integers range over their whole type, strings mix ASCII and multi-byte UTF-8, nullable
    fields are sometimes None, arrays hold 0 to 3 elements, tagged fields are present about
    half the time, and with unknown_tags flexible structs sometimes carry tags the schema
    does not know.
    """
    maker = _Random(version, is_flexible(definition, version), rng, unknown_tags)
    return maker.struct(definition["fields"], 0)

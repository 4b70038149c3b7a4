"""Kafka 0.7 error codes, the six of the wire-format notes' response-header table.

The notes spell them Unknown, NoError, OffsetOutOfRange, InvalidMessage, WrongPartition and
InvalidFetchSize; they are written here in the upper-case style of the modern error table,
with success as NONE, so that both protocols fill the same column the same way.
"""

ERROR_NAMES = {
    -1: "UNKNOWN",
    0: "NONE",
    1: "OFFSET_OUT_OF_RANGE",
    2: "INVALID_MESSAGE",
    3: "WRONG_PARTITION",
    4: "INVALID_FETCH_SIZE",
}


def error_name(code):
    if code is None:
        return None
    name = ERROR_NAMES.get(code)  # not .get(code, default): the default would be formatted
    return name if name is not None else f"UNKNOWN_ERROR_{code}"

"""Errors the dissector raises on purpose; anything else escaping is a bug."""


class DissectorError(Exception):
    """Base class of every error the product reports to its users."""


class CaptureError(DissectorError):
    """A capture file that cannot be read: names the file, the frame and the byte offset."""

    def __init__(self, path, reason, frame=None, offset=None):
        self.path = str(path)
        self.reason = reason
        self.frame = frame
        self.offset = offset
        where = []
        if frame is not None:
            where.append(f"frame {frame}")
        if offset is not None:
            where.append(f"offset {offset}")
        super().__init__(f"{self.path}: {', '.join(where) + ': ' if where else ''}{reason}")


class DecodeError(DissectorError):
    """Bytes that do not decode as the message they should be; offset is within the frame.
    partial: the fields of the body decoded before the failure, where there are some."""

    def __init__(self, reason, offset, partial=None):
        self.reason = reason
        self.offset = offset
        self.partial = partial
        super().__init__(f"{reason} at offset {offset}")

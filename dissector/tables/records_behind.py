"""The records table built and written by a second process while this one dissects.

The records table's cost comes in two halves of about the same size: the core with the
summary (packets into exchanges), and the table (each batch decompressed, its records read
into columns, the parquet file). With a second core free, the table's half runs in a child
process: this one hands it what the table needs of each exchange (record_columns.work: the
columns that repeat, the body's bytes and where its record sets lie), a few MB at a time
over a pipe, which holds one message at most, so that the child's lag bounds what is held.
The child reads the record sets in the same order, a capture at a time, with a record
decoder of its own under the same limits (it counts only the records' decompression where
one process would count the summary's too, with --decompress): the table is the one the
command would write alone (tests/test_records_behind.py).

An error in the child comes back as it was raised (an OSError naming the file) at the next
message or at close. Ctrl-C reaches both processes: the child ignores it, and is told to
close the file on what it was given, as one process does on what it wrote.
"""

import contextlib
import multiprocessing
import os
import pickle
import signal

from ..errors import DissectorError
from ..protocol.records import RecordSets
from . import arrow
from .output import TableWriter

MESSAGE = 4 << 20  # bytes of record sets (or keys and values) gathered before they are sent
_WAIT = 60  # seconds the child has to close the file once told


def usable():
    """Whether a second process helps: the compiled record reader (record_columns.pyx), and
    another core this process may use (Linux: the cores it may run on; elsewhere it stays one
    process, as fork is Linux's)."""
    if arrow.RecordColumns is None or not hasattr(os, "sched_getaffinity"):
        return False
    return len(os.sched_getaffinity(0)) > 1


class RecordsBehind:
    """The records table to `path`, written by a child process: `write(exchanges, capture,
    options)` for each capture, then `close()`; `rows` counts what was written."""

    def __init__(self, path, capture=False, compress_values=False):
        context = multiprocessing.get_context("fork")  # the child starts with what is loaded
        self._conn, theirs = context.Pipe()
        self._child = context.Process(
            target=_child,
            args=(theirs, str(path), capture, compress_values),
            name="records-table",
            daemon=True,
        )
        self._child.start()
        theirs.close()
        self.rows = 0
        self._open = True
        self._call(None)  # the file is open, or why not

    def write(self, exchanges, capture, options):
        """The records of one capture's exchanges, dissected with `options` (Options: the
        topics and partitions kept, the limits of the record decoder)."""
        self._send(("capture", (str(capture), options.record_decoder().limits)))
        wanted = options.wanted()
        items, size = [], 0
        for e in exchanges:
            item = arrow.work(e, wanted)
            if item is None:
                continue
            if item[0] == arrow.SETS:  # the child has a record decoder of its own
                item = item[:-1] + (None,)
                size += len(item[2])
            else:  # rows made here
                size += sum(len(r.get("key") or b"") + len(r["value"] or b"") for r in item[1])
            items.append(item)
            if size >= MESSAGE or len(items) >= arrow.BATCH_ROWS:
                self._send(("work", items))
                items, size = [], 0
        if items:
            self._send(("work", items))

    def close(self):
        """Has the child close the file, and waits for it; raises what it raised."""
        if self._open:
            self.rows = self._call(("close", None))

    def _send(self, message):
        try:
            self._put(message)
        except OSError:  # the child ended: what it raised
            self._call(None)
            raise

    def _put(self, message):
        """`message` to the child whole: Ctrl-C waits for the end of a message, or the
        child would read part of one."""
        data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            self._conn.send_bytes(data)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def _call(self, message):
        """The child's answer to `message` (None: none sent). Past "open", the child has
        ended, and is waited for; an error it raised is raised here."""
        if message is not None:
            with contextlib.suppress(OSError):  # it ended: its answer is still to read
                self._put(message)
        try:
            kind, value = self._conn.recv()
        except (EOFError, OSError):
            kind, value = "error", None
        if kind == "open":
            return value
        self._open = False
        self._conn.close()
        self._child.join(_WAIT)
        if self._child.is_alive():
            self._child.kill()
            self._child.join()
        if kind == "error":
            why = f"the process writing the records table ended (exit {self._child.exitcode})"
            raise value or DissectorError(why)
        return value


def _child(conn, path, capture, compress_values):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent says when to stop
    columns = decoder = name = None
    writer = None

    def flush():
        last = columns.finish() if columns is not None else None
        if last is not None:
            writer.write(last, capture=name)

    try:
        writer = TableWriter(path, "records", capture, compress_values, background=True)
        conn.send(("open", None))
        while True:
            kind, value = pickle.loads(conn.recv_bytes())
            if kind == "work":
                for item in value:
                    for batch in columns.add_work(item, decoder):
                        writer.write(batch, capture=name)
            elif kind == "capture":
                flush()
                name, limits = value
                columns = arrow.record_columns()
                decoder = RecordSets(limits)  # a capture's own, as its dissection has
            else:
                flush()
                break
        writer.close()
        conn.send(("rows", writer.rows))
    except BaseException as e:  # noqa: BLE001  (given to the parent to raise)
        if writer is not None:
            with contextlib.suppress(Exception):  # the first error is the one to tell
                writer.close()
        with contextlib.suppress(OSError):  # the parent is gone: no one to tell
            try:
                conn.send(("error", e))
            except (pickle.PicklingError, TypeError, AttributeError):  # it does not pickle
                conn.send(("error", RuntimeError(f"{type(e).__name__}: {e}")))
    finally:
        conn.close()

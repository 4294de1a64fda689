"""Append-only evidence channels: a FIFO the sandboxed run can write to but never read, truncate, delete or replace,
drained on the host into a file the run cannot reach.

The FIFO sits in the run's audit directory, which the backends mount read-only: a FIFO on a read-only mount can
still be opened for writing (Linux checks the mount only for regular files and directories; measured on bwrap and on
Docker bind mounts), while unlinking, renaming, truncating or chmod-ing it is refused. Its mode is write-only
(0222), set after the host opened its ends, so the run — root without capabilities in bwrap, an unprivileged user in
Docker — cannot open it for reading either (that would steal records before the host sees them).

The host holds a write end for the whole run, so the reader never sees end-of-file between two writers; a thread
drains the FIFO continuously (a writer blocks once the pipe buffer is full). After the run the host closes its write
end and drains to end-of-file. Writes of up to PIPE_BUF bytes are atomic, so concurrent writers' lines never
interleave (the audit hook and the supervisor keep each record below that size)."""

from __future__ import annotations

import os
import select
import threading
import time
from pathlib import Path

MAX_BYTES = 256 * 1024 * 1024  # kept per run; more is dropped (and counted: a flood is evidence too)
CHUNK = 65536
DRAIN_SECONDS = 10.0
POLL_MS = 100
WRITE_ONLY = 0o222


class Channel:
    """One FIFO at ``fifo`` copied to ``sink`` (a host-only path) from creation until `close()`."""

    def __init__(self, fifo: Path, sink: Path) -> None:
        self.fifo = fifo
        self.sink = sink
        self.dropped = 0
        self.complete = True
        self._deadline: float | None = None
        os.mkfifo(fifo, 0o600)
        self._read = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self._write: int | None = os.open(fifo, os.O_WRONLY)  # a reader exists, so this does not block
        os.set_blocking(self._read, True)
        os.chmod(fifo, WRITE_ONLY)
        self._thread = threading.Thread(target=self._drain, name=f"cascade-channel-{fifo.name}", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        kept = 0
        poller = select.poll()
        poller.register(self._read, select.POLLIN)
        with self.sink.open("wb") as out:
            while True:
                if not poller.poll(POLL_MS):
                    if self._deadline is not None and time.monotonic() > self._deadline:
                        self.complete = False  # a writer outlived the run: stop copying rather than hang
                        return
                    continue
                data = os.read(self._read, CHUNK)
                if not data:  # every write end is closed: the whole stream is in
                    return
                room = max(0, MAX_BYTES - kept)
                out.write(data[:room])
                kept += min(room, len(data))
                self.dropped += len(data) - min(room, len(data))

    def close(self) -> None:
        """End the channel: drop the host's write end and drain to end-of-file. A writer still alive after the run
        (the sandbox kills everything, so it should not happen) would hold it open: the copy then stops unfinished
        after a bounded wait, and ``complete`` says so."""
        if self._write is None:
            return
        self._deadline = time.monotonic() + DRAIN_SECONDS
        os.close(self._write)
        self._write = None
        self._thread.join()
        os.close(self._read)

    def __enter__(self) -> Channel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""``TraceWriter``: appends trace lines to a file from a background thread.

The voice loop only hands over a finished line (a non-blocking queue put);
opening, writing and flushing the file happen on the writer's own thread, so
a slow disk never stalls a frame. Lines reach the file in the order they
were handed over, and :meth:`TraceWriter.close` returns once all of them are
written.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path

from loguru import logger

__all__ = ["TraceWriter"]

_CLOSE = object()


class TraceWriter:
    """Write lines to ``path`` off the caller's thread.

    Args:
        path: The file to create (its directory is created too); an existing file is replaced.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.error: BaseException | None = None

    def write(self, line: str) -> None:
        """Queue one line (without its newline) for writing; never blocks."""
        if self._closed:
            raise ValueError(f"trace writer for {self.path} is closed")
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"trace-writer:{self.path.name}", daemon=True)
            self._thread.start()
        self._queue.put(line)

    def close(self) -> None:
        """Write everything queued, close the file and stop the thread."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._queue.put(_CLOSE)
            self._thread.join()

    def _run(self) -> None:
        item: object = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("w", encoding="utf-8") as handle:
                while True:
                    item = self._queue.get()
                    batch = [item]
                    # Drain what has piled up so a burst of events costs one write and one flush.
                    while item is not _CLOSE:
                        try:
                            item = self._queue.get_nowait()
                        except queue.Empty:
                            break
                        batch.append(item)
                    lines = [line for line in batch if isinstance(line, str)]
                    if lines:
                        handle.write("\n".join(lines) + "\n")
                        handle.flush()
                    if item is _CLOSE:
                        return
        except OSError as exc:
            # The call goes on without its trace; the failure is reported once.
            self.error = exc
            logger.error(f"trace file {self.path} could not be written: {exc}")
            while item is not _CLOSE:
                item = self._queue.get()

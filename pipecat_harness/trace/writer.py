"""``TraceWriter``: encodes trace records and appends them to a file from a background thread.

The loop only queues a record; one writer thread per process encodes and writes what piled up every ``BATCH_SECS``,
so an event costs no thread switch and a slow disk never stalls a frame. Lines keep their order per file.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from loguru import logger

__all__ = ["BATCH_SECS", "TraceWriter", "encode_record"]

#: Longest a written line waits in memory before it reaches the file.
BATCH_SECS = 0.5

_CLOSE = object()


def encode_record(record: Mapping[str, Any]) -> str:
    """One trace line: ``record`` as JSON, values JSON does not know as their text.

    A record JSON cannot hold at all (circular data) keeps its time, lane and kind, with the rest as text.
    """
    try:
        return json.dumps(record, default=str, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        rest = {k: v for k, v in record.items() if k not in ("t", "lane", "kind")}
        head = {"t": record.get("t"), "lane": record.get("lane"), "kind": record.get("kind")}
        return json.dumps({**head, "data": str(rest)}, default=str, ensure_ascii=False)


class _WriterThread:
    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[tuple[TraceWriter, object]] = queue.SimpleQueue()
        self.hurry = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def put(self, writer: TraceWriter, item: object) -> None:
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._run, name="trace-writer", daemon=True)
                    self._thread.start()
        self.queue.put((writer, item))

    def _run(self) -> None:
        while True:
            batch = [self.queue.get()]
            # Let a burst of events pile up (unless a trace is being closed), then write it in one go.
            self.hurry.wait(BATCH_SECS)
            self.hurry.clear()
            while not self.queue.empty():
                batch.append(self.queue.get_nowait())
            lines: dict[TraceWriter, list[str]] = {}
            closing: list[TraceWriter] = []
            for writer, item in batch:
                if item is _CLOSE:
                    closing.append(writer)
                else:
                    line = item if isinstance(item, str) else encode_record(item)  # type: ignore[arg-type]
                    lines.setdefault(writer, []).append(line)
            for writer, pending in lines.items():
                writer._write_lines(pending)
            for writer in closing:
                writer._finish()


_THREAD = _WriterThread()


class TraceWriter:
    """Write lines to ``path`` (created with its directory, replacing any file) off the caller's thread."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.error: OSError | None = None
        self._handle: IO[str] | None = None
        self._closed = False
        self._done = threading.Event()

    def write(self, line: str | Mapping[str, Any]) -> None:
        """Queue a line (no newline) or a record (unchanged afterwards); never blocks (``ValueError`` once closed)."""
        if self._closed:
            raise ValueError(f"trace writer for {self.path} is closed")
        _THREAD.put(self, line)

    def close(self, timeout_secs: float = 10.0) -> None:
        """Write everything queued, close the file, and wait (at most ``timeout_secs``) until that is done."""
        if self._closed:
            return
        self._closed = True
        _THREAD.put(self, _CLOSE)
        _THREAD.hurry.set()
        if not self._done.wait(timeout_secs):
            logger.warning(f"trace file {self.path} not finished after {timeout_secs} s")

    def _write_lines(self, lines: list[str]) -> None:
        if self.error is not None:
            return
        try:
            if self._handle is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._handle = self.path.open("w", encoding="utf-8")
            self._handle.write("\n".join(lines) + "\n")
            self._handle.flush()
        except OSError as exc:
            # The call goes on without its trace; the failure is reported once.
            self.error = exc
            logger.error(f"trace file {self.path} could not be written: {exc}")

    def _finish(self) -> None:
        try:
            if self._handle is not None:
                self._handle.close()
        except OSError as exc:
            self.error = exc
        finally:
            self._handle = None
            self._done.set()

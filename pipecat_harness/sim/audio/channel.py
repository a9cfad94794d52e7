"""The line between the caller and the bot: ``clean``, ``phone`` (8 kHz G.711 μ-law, as Twilio carries) or ``noise``."""

from __future__ import annotations

import hashlib

import numpy as np

from pipecat_harness.sim.audio.voice import SAMPLE_RATE, from_pcm, to_pcm

__all__ = ["CHANNELS", "NOISE_SNR_DB", "through_channel"]

CHANNELS: tuple[str, ...] = ("clean", "phone", "noise")
NOISE_SNR_DB = 15.0
_MU = 255.0
_PHONE_RATE = 8000


def _mu_law_round_trip(x: np.ndarray) -> np.ndarray:
    """G.711 μ-law: 8-bit companded codes and back (the quantisation a phone call adds)."""
    compressed = np.sign(x) * np.log1p(_MU * np.abs(x)) / np.log1p(_MU)
    codes = np.round((compressed + 1.0) * 127.5).astype(np.int16)
    expanded = codes.astype(np.float32) / 127.5 - 1.0
    return np.sign(expanded) * np.expm1(np.abs(expanded) * np.log1p(_MU)) / _MU


def _noise(n: int, seed: int) -> np.ndarray:
    """Pink noise above 60 Hz at unit RMS."""
    rng = np.random.default_rng(seed)
    spectrum = np.fft.rfft(rng.standard_normal(n))
    freqs = np.fft.rfftfreq(n, 1.0 / SAMPLE_RATE)
    shape = np.where(freqs > 60.0, 1.0 / np.sqrt(np.maximum(freqs, 1.0)), 0.0)
    noise = np.fft.irfft(spectrum * shape, n)
    return noise / (np.sqrt(np.mean(noise**2)) or 1.0)


def through_channel(pcm: bytes, channel: str) -> bytes:
    """``pcm`` (16 kHz mono int16) as the bot hears it over ``channel`` (a ValueError when unknown)."""
    if channel not in CHANNELS:
        raise ValueError(f"unknown channel {channel!r}; choose one of {', '.join(CHANNELS)}")
    if channel == "clean" or not pcm:
        return pcm
    x = from_pcm(pcm)
    if channel == "phone":
        import soxr

        narrow = soxr.resample(x, SAMPLE_RATE, _PHONE_RATE)
        y = soxr.resample(_mu_law_round_trip(np.clip(narrow, -1.0, 1.0)), _PHONE_RATE, SAMPLE_RATE)[: len(x)]
        y = np.pad(y, (0, len(x) - len(y)))
    else:
        frame = 320
        usable = len(x) // frame * frame
        energy = np.sqrt(np.mean(x[:usable].reshape(-1, frame) ** 2, axis=1)) if usable else np.zeros(1)
        speech = energy[energy > max(1e-4, 0.1 * float(energy.max()))]
        speech_rms = float(np.sqrt(np.mean(speech**2))) if speech.size else 0.0
        seed = int(hashlib.sha256(pcm[:64000]).hexdigest()[:8], 16)
        y = x + _noise(len(x), seed) * speech_rms / (10 ** (NOISE_SNR_DB / 20))
    return to_pcm(y)

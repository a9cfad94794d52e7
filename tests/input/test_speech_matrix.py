"""The speech matrix's parts: its channels, its second voice and its dev/test splits."""

from __future__ import annotations

import json
import runpy
import shutil
from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).parent / "data"
RATE = 16000


def _tone(hz: float, secs: float = 1.0, amplitude: float = 0.3) -> bytes:
    t = np.arange(int(secs * RATE)) / RATE
    return (np.sin(2 * np.pi * hz * t) * amplitude * 32767).astype(np.int16).tobytes()


def _pcm(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.int16).astype(np.float64) / 32768.0


def test_the_phone_line_keeps_the_voice_band_and_drops_what_8_khz_cannot_carry() -> None:
    pytest.importorskip("soxr")
    from pipecat_harness.sim.audio.channel import through_channel

    voice, high = _tone(440), _tone(6000)
    heard = _pcm(through_channel(voice, "phone"))
    assert len(heard) == len(_pcm(voice))
    error = heard[800:-800] - _pcm(voice)[800:-800]
    # μ-law quantisation and the band filter leave the tone clearly above the error (> 20 dB).
    assert 10 * np.log10(np.mean(_pcm(voice)[800:-800] ** 2) / np.mean(error**2)) > 20
    # A 6 kHz tone does not survive an 8 kHz line.
    assert np.mean(_pcm(through_channel(high, "phone")) ** 2) < 0.01 * np.mean(_pcm(high) ** 2)


def test_the_noisy_line_is_15_db_below_the_speech_and_the_same_every_time() -> None:
    from pipecat_harness.sim.audio.channel import NOISE_SNR_DB, through_channel

    speech = _tone(300, 1.0) + bytes(RATE * 2)  # a second of "speech", a second of silence
    once, twice = through_channel(speech, "noise"), through_channel(speech, "noise")
    assert once == twice
    noise = _pcm(once) - _pcm(speech)
    snr = 10 * np.log10(np.mean(_pcm(speech)[:RATE] ** 2) / np.mean(noise**2))
    assert abs(snr - NOISE_SNR_DB) < 1.0
    assert np.mean(_pcm(once)[RATE:] ** 2) > 0  # the line hisses between words too


def test_an_unknown_channel_is_named() -> None:
    from pipecat_harness.sim.audio.channel import through_channel

    with pytest.raises(ValueError, match="unknown channel 'radio'"):
        through_channel(b"\x00\x00", "radio")


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed (apt-get install espeak-ng)")
def test_espeak_speaks_the_same_bytes_each_time_and_faster_at_more_words_per_minute(tmp_path: Path) -> None:
    pytest.importorskip("soxr")
    from pipecat_harness.sim.audio.cache import AudioCache
    from pipecat_harness.sim.audio.espeak_voice import EspeakCallerVoice

    text = "My order number is W two three seven"
    slow = EspeakCallerVoice(AudioCache(tmp_path / "a"), words_per_minute=150).say(text)
    again = EspeakCallerVoice(AudioCache(tmp_path / "b"), words_per_minute=150).say(text)
    fast = EspeakCallerVoice(AudioCache(tmp_path / "a"), words_per_minute=200).say(text)
    assert slow == again and len(slow) > 16000
    assert len(fast) < 0.85 * len(slow)


def _rows(split: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in (DATA / f"matrix_{split}.jsonl").read_text(encoding="utf-8").splitlines()]


def test_the_splits_share_no_identifier_and_no_phrasing() -> None:
    dev, test = _rows("dev"), _rows("test")
    assert {r["expected"] for r in dev}.isdisjoint({r["expected"] for r in test})
    assert {r["split"] for r in dev} == {"dev"} and {r["split"] for r in test} == {"test"}
    for rows in (dev, test):
        assert {r["label"] for r in rows} == {"split", "complete"}
        assert all(len(r["parts"]) == (2 if r["label"] == "split" else 1) for r in rows)  # type: ignore[arg-type]
        assert all(0.8 <= float(r["pause"]) <= 2.0 for r in rows)  # type: ignore[arg-type]
    # Test readers are other voice variants than dev's.
    assert {r["espeak_variant"] for r in dev}.isdisjoint({r["espeak_variant"] for r in test})


def test_the_generator_reproduces_both_splits_byte_for_byte(tmp_path: Path) -> None:
    module = runpy.run_path(str(DATA / "make_matrix_corpus.py"), run_name="regenerate")
    module["main"].__globals__["HERE"] = tmp_path
    module["main"]()
    for split in ("dev", "test"):
        assert (tmp_path / f"matrix_{split}.jsonl").read_bytes() == (DATA / f"matrix_{split}.jsonl").read_bytes()

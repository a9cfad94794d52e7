"""The caller's voice is a pure function of (voice, text, rate): the same bytes in every process and in any order."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipecat_harness.sim.audio.requirements import missing_audio_packages

pytestmark = pytest.mark.skipif(bool(missing_audio_packages()),
                                reason=f"audio mode needs {', '.join(missing_audio_packages())} ([audio] extra)")

_SYNTHESISE = """
import hashlib, json, sys
from pathlib import Path
from pipecat_harness.sim.audio.cache import AudioCache
from pipecat_harness.sim.audio.voice import PiperCallerVoice
cache = AudioCache(Path(sys.argv[1]))
voice = PiperCallerVoice(cache)
heard = {text: hashlib.sha256(voice.say(text, rate=rate)).hexdigest() for text, rate in json.loads(sys.argv[2])}
print(json.dumps({"audio": heard, "synthesised": cache.misses}))
"""


def _synthesise_in_a_fresh_process(cache: Path, utterances: list[tuple[str, float]]) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", _SYNTHESISE, str(cache), json.dumps(utterances)],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ), check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_an_utterance_is_the_same_bytes_in_two_fresh_processes_whatever_was_said_before(tmp_path: Path) -> None:
    utterances = [("My order number is W two three seven", 1.0), ("eight one five six", 1.2), ("Yes, please.", 1.0)]
    first = _synthesise_in_a_fresh_process(tmp_path / "one", utterances)
    second = _synthesise_in_a_fresh_process(tmp_path / "two", utterances[::-1])
    assert first["synthesised"] == second["synthesised"] == len(utterances)  # nothing came from a cache
    assert first["audio"] == second["audio"]
    assert len(set(dict(first["audio"]).values())) == len(utterances)  # different words, different audio


def test_audio_cached_before_synthesis_was_seeded_is_not_reused(tmp_path: Path) -> None:
    from pipecat_harness.sim.audio.cache import AudioCache, digest
    from pipecat_harness.sim.audio.voice import PiperCallerVoice

    cache = AudioCache(tmp_path)
    text, stale = "Yes, please.", b"\x01\x00" * 800
    cache.put_audio(digest("en_US-joe-medium", "1.000", text), stale)  # the key unseeded audio was stored under
    voice = PiperCallerVoice(cache)
    assert not voice.is_cached(text)
    fresh = voice.say(text)
    assert fresh != stale and len(fresh) > 16000 and voice.is_cached(text)

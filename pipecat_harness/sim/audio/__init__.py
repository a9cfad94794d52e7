"""Offline audio calls: the caller's script voiced with Piper, heard by Silero VAD and Whisper tiny.en."""

from __future__ import annotations

from pipecat_harness.sim.audio.cache import AudioCache, default_cache_dir
from pipecat_harness.sim.audio.requirements import AudioModeUnavailable, require_audio_mode

__all__ = ["AudioCache", "AudioModeUnavailable", "default_cache_dir", "require_audio_mode"]

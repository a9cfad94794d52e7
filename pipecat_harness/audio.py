"""Audio frame arithmetic shared by the controls and the trace."""

from __future__ import annotations

from pipecat.frames.frames import AudioRawFrame

__all__ = ["audio_frame_secs"]


def audio_frame_secs(frame: AudioRawFrame) -> float:
    """How long a frame of 16-bit PCM audio plays."""
    return len(frame.audio) / (frame.sample_rate * max(1, frame.num_channels) * 2)

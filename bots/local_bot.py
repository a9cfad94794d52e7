"""The retail agent on this computer's microphone and speaker.

    python bots/local_bot.py

Needs PortAudio and PyAudio (``apt-get install portaudio19-dev`` or
``brew install portaudio``, then ``pip install -e ".[bots,local]"``). Use
headphones: the bot hears its own voice through open speakers and
interrupts itself.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bots.settings import PROVIDER_KEYS, BotSettings, startup_settings
from pipecat_harness.config import HarnessConfig

if TYPE_CHECKING:
    from pipecat.transports.local.audio import LocalAudioTransport

__all__ = ["REQUIREMENTS", "local_transport", "run"]

REQUIREMENTS = PROVIDER_KEYS


def local_transport(input_device_index: int | None = None, output_device_index: int | None = None) -> (
    LocalAudioTransport
):
    """The default (or chosen) microphone and speaker.

    Raises:
        ModuleNotFoundError: PyAudio is not installed (the message says how to install it).
    """
    try:
        import pyaudio  # noqa: F401  (LocalAudioTransport needs it; fail here with the fix, not deep in Pipecat)
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            "local_bot needs the 'pyaudio' package (PortAudio bindings): install the system library "
            "(apt-get install portaudio19-dev, or brew install portaudio), then pip install -e \".[bots,local]\"",
            name="pyaudio",
        ) from exc
    from pipecat.transports.local.audio import LocalAudioTransport, LocalAudioTransportParams

    return LocalAudioTransport(
        LocalAudioTransportParams(
            audio_in_enabled=True,
            audio_out_enabled=True,
            input_device_index=input_device_index,
            output_device_index=output_device_index,
        )
    )


def _device_index(name: str) -> int | None:
    import os

    value = os.getenv(name, "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"local_bot: {name} must be a device number, not {value!r}") from None


async def run(settings: BotSettings, config: HarnessConfig) -> None:
    """Open the audio devices and run one conversation until Ctrl-C."""
    from bots.agent import build_agent

    transport = local_transport(_device_index("LOCAL_AUDIO_INPUT_DEVICE"), _device_index("LOCAL_AUDIO_OUTPUT_DEVICE"))
    agent = await build_agent(transport, settings=settings, bot_name="local", harness_config=config)
    print(f"local_bot: speak after the greeting; Ctrl-C ends the call. Trace: {agent.trace_path}", flush=True)
    await agent.greet()
    await agent.run(handle_sigint=True)


def main() -> None:
    """Check the keys (before touching any device or connection), then run."""
    settings, config = startup_settings("local_bot", REQUIREMENTS)
    try:
        asyncio.run(run(settings, config))
    except ModuleNotFoundError as exc:
        if exc.name != "pyaudio":
            raise
        raise SystemExit(str(exc)) from None


if __name__ == "__main__":
    main()

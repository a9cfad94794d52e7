"""The retail agent in a Daily WebRTC room.

With ``DAILY_ROOM_URL`` set, the bot joins that room (with ``DAILY_TOKEN``, or
a token minted with ``DAILY_API_KEY``, or none for a public room); otherwise it
creates a temporary room with ``DAILY_API_KEY`` and prints its URL. Open the
URL in a browser and talk.

    python bots/daily_bot.py
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loguru import logger
from pipecat.transports.daily.transport import DailyParams, DailyTransport

from bots.settings import DAILY_REQUIREMENTS, PROVIDER_KEYS, BotSettings, startup_settings
from pipecat_harness.config import HarnessConfig

__all__ = ["REQUIREMENTS", "daily_transport", "resolve_room", "run"]

REQUIREMENTS = (*PROVIDER_KEYS, *DAILY_REQUIREMENTS)

BOT_NAME = "Retail agent"


def daily_transport(room_url: str, token: str | None) -> DailyTransport:
    """A Daily transport for the agent: audio in and out, no video."""
    return DailyTransport(
        room_url,
        token,
        BOT_NAME,
        params=DailyParams(audio_in_enabled=True, audio_out_enabled=True),
    )


async def resolve_room() -> tuple[str, str | None]:
    """Return the room to join and its token: the configured room, or a new one."""
    room_url = os.getenv("DAILY_ROOM_URL", "").strip()
    token = os.getenv("DAILY_TOKEN", "").strip() or None
    api_key = os.getenv("DAILY_API_KEY", "").strip()
    if room_url and (token or not api_key):
        return room_url, token
    import aiohttp
    from pipecat.runner.daily import configure

    # configure() mints a token for DAILY_ROOM_URL when set, else creates a temporary room.
    async with aiohttp.ClientSession() as session:
        room = await configure(session, api_key=api_key)
    return room.room_url, room.token


async def run(settings: BotSettings, config: HarnessConfig) -> None:
    """Join or create the room and run one conversation."""
    from bots.agent import build_agent

    room_url, token = await resolve_room()
    print(f"daily_bot: join the call at {room_url}", flush=True)
    transport = daily_transport(room_url, token)
    agent = await build_agent(transport, settings=settings, bot_name="daily", harness_config=config)
    logger.info(f"call {agent.harness.call_id}: trace {agent.trace_path}")
    await agent.run(handle_sigint=True)


def main() -> None:
    """Check the keys, then run."""
    settings, config = startup_settings("daily_bot", REQUIREMENTS)
    asyncio.run(run(settings, config))


if __name__ == "__main__":
    main()

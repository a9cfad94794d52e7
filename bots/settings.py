"""What the bots read from the environment, and the check that runs before any connection opens.

Every variable is listed in ``.env.example``. A bot calls
:func:`exit_if_missing` first thing: with a needed key absent it prints the
variable names and exits non-zero before creating a service or a transport.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pipecat_harness.config import HarnessConfig

__all__ = [
    "DAILY_REQUIREMENTS",
    "PROVIDER_KEYS",
    "TWILIO_REQUIREMENTS",
    "BotSettings",
    "MissingSettingsError",
    "Requirement",
    "exit_if_missing",
    "load_dotenv_from_cwd",
    "missing_settings",
    "startup_settings",
    "wants_help",
]

#: ElevenLabs' "Rachel" premade voice, available on every account.
DEFAULT_VOICE_ID = "21m00Tcm4TlvDq8ikWAM"

TurnStop = Literal["smart_turn", "speech_timeout"]


@dataclass(frozen=True)
class Requirement:
    """One needed setting, satisfied by any of its alternatives.

    An alternative is one variable name or several joined by ``+`` (all needed).
    """

    alternatives: tuple[str, ...]

    @classmethod
    def of(cls, *alternatives: str) -> Requirement:
        """Build a requirement from its alternatives."""
        return cls(tuple(alternatives))

    def satisfied_by(self, env: Mapping[str, str]) -> bool:
        """Whether ``env`` has every variable of at least one alternative (non-empty)."""
        return any(all(env.get(name, "").strip() for name in option.split("+")) for option in self.alternatives)

    def describe(self) -> str:
        """The requirement as the missing-key message spells it."""
        return " or ".join(" and ".join(option.split("+")) for option in self.alternatives)


#: The three provider keys every bot needs.
PROVIDER_KEYS = (
    Requirement.of("DEEPGRAM_API_KEY"),
    Requirement.of("GOOGLE_API_KEY"),
    Requirement.of("ELEVENLABS_API_KEY"),
)

#: Daily: create a room (API key) or join a given one.
DAILY_REQUIREMENTS = (Requirement.of("DAILY_API_KEY", "DAILY_ROOM_URL"),)

#: Twilio: credentials for the REST hang-up at the end of a call.
TWILIO_REQUIREMENTS = (
    Requirement.of("TWILIO_ACCOUNT_SID"),
    Requirement.of("TWILIO_AUTH_TOKEN", "TWILIO_API_KEY+TWILIO_API_SECRET"),
)


class MissingSettingsError(RuntimeError):
    """Needed environment variables are absent.

    Args:
        missing: The unmet requirements, as :meth:`Requirement.describe` spells them.
    """

    def __init__(self, missing: list[str]) -> None:
        self.missing = missing
        super().__init__("missing environment variable(s): " + ", ".join(missing))


def missing_settings(requirements: Iterable[Requirement], env: Mapping[str, str] | None = None) -> list[str]:
    """Return the unmet requirements, described, in order."""
    env = os.environ if env is None else env
    return [r.describe() for r in requirements if not r.satisfied_by(env)]


def load_dotenv_from_cwd() -> None:
    """Load ``./.env`` when present; variables already set win."""
    path = Path.cwd() / ".env"
    if path.is_file():
        from dotenv import load_dotenv

        load_dotenv(path, override=False)


def exit_if_missing(program: str, requirements: Iterable[Requirement]) -> None:
    """Print the missing variables and exit with status 2 when any requirement is unmet.

    Args:
        program: Name used in the message (``local_bot``...).
        requirements: What this bot needs.
    """
    missing = missing_settings(requirements)
    if missing:
        print(f"{program}: missing environment variable(s): {', '.join(missing)}", file=sys.stderr)
        print(f"{program}: copy .env.example to .env and fill them in (see README, section Bots)", file=sys.stderr)
        raise SystemExit(2)


def wants_help(argv: Iterable[str]) -> bool:
    """Whether the command line asks for help (which needs no keys)."""
    return any(arg in ("-h", "--help") for arg in argv)


def startup_settings(program: str, requirements: Iterable[Requirement]) -> tuple[BotSettings, HarnessConfig]:
    """Check keys, settings and the harness config once, before any connection; exit 2 with one sentence if wrong.

    A wrong ``PIPECAT_HARNESS_CONFIG`` path or value therefore stops the bot at
    start instead of reaching the first caller.

    Args:
        program: Name used in messages (``agent``...).
        requirements: What this bot needs.

    Returns:
        The settings and the validated harness configuration every call uses.
    """
    load_dotenv_from_cwd()
    exit_if_missing(program, requirements)
    try:
        settings = BotSettings.from_env()
        return settings, settings.harness_config()
    except ValueError as exc:  # ConfigError and bad settings: one sentence naming the setting
        print(f"{program}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _turn_stop(value: str) -> TurnStop:
    if value in ("smart_turn", "speech_timeout"):
        return value  # type: ignore[return-value]
    raise ValueError(f"BOT_TURN_STOP must be smart_turn or speech_timeout, not {value!r}")


@dataclass(frozen=True)
class BotSettings:
    """Everything the shared bot definition reads from the environment.

    Parameters:
        deepgram_api_key: ``DEEPGRAM_API_KEY``.
        google_api_key: ``GOOGLE_API_KEY`` (Gemini through google-genai).
        elevenlabs_api_key: ``ELEVENLABS_API_KEY``.
        elevenlabs_voice_id: ``ELEVENLABS_VOICE_ID``.
        elevenlabs_model: ``ELEVENLABS_MODEL``.
        deepgram_model: ``DEEPGRAM_MODEL`` (a nova-3 model).
        gemini_model: ``GEMINI_MODEL``; empty uses Pipecat's default.
        turn_stop: ``BOT_TURN_STOP``: ``smart_turn`` (Pipecat's default) or ``speech_timeout``.
        speech_timeout_secs: ``BOT_SPEECH_TIMEOUT_SECS`` for ``speech_timeout``.
        retail_db_path: ``RETAIL_DB_PATH``; created and seeded when absent.
        harness_config_path: ``PIPECAT_HARNESS_CONFIG``, a YAML file; ``PIPECAT_HARNESS_*`` variables override it.
    """

    deepgram_api_key: str
    google_api_key: str
    elevenlabs_api_key: str
    elevenlabs_voice_id: str = DEFAULT_VOICE_ID
    elevenlabs_model: str = "eleven_flash_v2_5"
    deepgram_model: str = "nova-3-general"
    gemini_model: str = ""
    turn_stop: TurnStop = "smart_turn"
    speech_timeout_secs: float = 0.6
    retail_db_path: str = "retail_demo.db"
    harness_config_path: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> BotSettings:
        """Read the settings.

        Raises:
            MissingSettingsError: A provider key is absent.
            ValueError: A setting has an unusable value (the message names it).
        """
        env = os.environ if env is None else env
        missing = missing_settings(PROVIDER_KEYS, env)
        if missing:
            raise MissingSettingsError(missing)
        try:
            timeout = float(env.get("BOT_SPEECH_TIMEOUT_SECS", "") or 0.6)
        except ValueError as exc:
            raise ValueError(f"BOT_SPEECH_TIMEOUT_SECS must be a number: {exc}") from exc
        return cls(
            deepgram_api_key=env["DEEPGRAM_API_KEY"].strip(),
            google_api_key=env["GOOGLE_API_KEY"].strip(),
            elevenlabs_api_key=env["ELEVENLABS_API_KEY"].strip(),
            elevenlabs_voice_id=env.get("ELEVENLABS_VOICE_ID", "").strip() or DEFAULT_VOICE_ID,
            elevenlabs_model=env.get("ELEVENLABS_MODEL", "").strip() or "eleven_flash_v2_5",
            deepgram_model=env.get("DEEPGRAM_MODEL", "").strip() or "nova-3-general",
            gemini_model=env.get("GEMINI_MODEL", "").strip(),
            turn_stop=_turn_stop(env.get("BOT_TURN_STOP", "").strip() or "smart_turn"),
            speech_timeout_secs=timeout,
            retail_db_path=env.get("RETAIL_DB_PATH", "").strip() or "retail_demo.db",
            harness_config_path=env.get("PIPECAT_HARNESS_CONFIG", "").strip(),
        )

    def harness_config(self) -> HarnessConfig:
        """The harness configuration: the YAML file if set, ``PIPECAT_HARNESS_*`` variables on top."""
        if self.harness_config_path:
            return HarnessConfig.from_yaml(self.harness_config_path)
        return HarnessConfig()

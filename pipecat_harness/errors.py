"""Errors a user can act on: a wrong command line, a missing optional extra.

Every such error is one sentence that names what is wrong and what would fix
it; the command line prints it and exits with status 2 instead of a traceback.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

__all__ = [
    "EXTRA_INCLUDES",
    "EXTRA_MODULES",
    "GEMINI_KEY_ENV",
    "InputError",
    "UsageError",
    "extra_for_module",
    "gemini_client",
    "import_or_name_extra",
    "missing_extra_message",
    "require_extra",
]

#: The top-level modules each optional extra of ``pipecat-harness`` installs.
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "sqlite": ("sqlalchemy", "aiosqlite"),
    "lab": ("time_machine", "rich"),
    "proxy": ("fastapi", "uvicorn", "httpx", "openai", "websockets", "starlette"),
    "postgres": ("asyncpg",),
    "redis": ("redis",),
    "gemini": ("google",),
    "bots": ("dotenv", "daily", "deepgram", "elevenlabs", "onnxruntime", "aiortc"),
    "local": ("pyaudio",),
}

#: Extras that install other extras, as ``pyproject.toml`` declares them.
EXTRA_INCLUDES: dict[str, tuple[str, ...]] = {
    "lab": ("sqlite",), "postgres": ("sqlite",), "proxy": ("sqlite",), "bots": ("sqlite",),
}


class InputError(ValueError):
    """Input a user gave (a file, a setting, an argument) that cannot be used.

    The message is one sentence naming the file, field or setting and what
    would fix it; the command line prints it and exits with status 2. Each
    kind of input has its own subclass (``ConfigError``, ``ScenarioError``...).
    """


class UsageError(InputError):
    """A command line or environment that cannot work (a missing extra, a bad option value)."""


def extra_for_module(module: str) -> str | None:
    """The extra that installs ``module`` (a dotted name), or ``None`` when no extra does."""
    top = module.split(".", 1)[0]
    return next((extra for extra, modules in EXTRA_MODULES.items() if top in modules), None)


def missing_extra_message(what: str, module: str, extra: str) -> str:
    """One sentence: ``what`` needs ``module``, which the extra installs."""
    return (f"{what} needs the '{extra}' extra ({module.split('.', 1)[0]} is not installed); "
            f"install it with: pip install \"pipecat-harness[{extra}]\"")


def require_extra(what: str, module: str, extra: str) -> None:
    """Import ``module`` or raise :class:`UsageError` naming the extra to install.

    Raises:
        UsageError: ``module`` is not installed.
    """
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise UsageError(missing_extra_message(what, module, extra)) from exc


def import_or_name_extra(module: str, what: str, extra: str | None = None) -> Any:
    """Import ``module``; when a module an extra installs is missing, raise :class:`UsageError` naming the extra.

    Args:
        module: The dotted module to import.
        what: What needs it, for the message (``"pipecat-harness simulate"``, ``"control 'grader'"``).
        extra: The extra to name when it installs the missing module itself or through an extra it
            includes (a command's own extra).

    Raises:
        UsageError: A module of an extra is not installed.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        needed = extra_for_module(missing)
        if needed is None:
            raise
        named = extra if extra is not None and needed in (extra, *EXTRA_INCLUDES.get(extra, ())) else needed
        raise UsageError(missing_extra_message(what, missing, named)) from exc


#: Environment variables a Gemini client reads its key from.
GEMINI_KEY_ENV = ("GOOGLE_API_KEY", "GEMINI_API_KEY")


def gemini_client(what: str, alternative: str) -> Any:
    """A ``google.genai.Client`` from the environment's key.

    Args:
        what: What needs the client, for the message (``"grader mode 'llm'"``).
        alternative: What works without a key (``"use --mode rules"``).

    Raises:
        UsageError: The ``gemini`` extra is missing or no key is set.
    """
    require_extra(what, "google.genai", "gemini")
    if not any(os.environ.get(name) for name in GEMINI_KEY_ENV):
        raise UsageError(f"{what} needs a Gemini API key; set GOOGLE_API_KEY (or GEMINI_API_KEY), or {alternative}")
    from google import genai

    return genai.Client()

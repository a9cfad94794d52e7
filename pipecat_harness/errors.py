"""Errors a user can act on: one sentence naming what is wrong and what would fix it (the command line exits 2)."""

from __future__ import annotations

import importlib
import os
from typing import Any

__all__ = ["EXTRA_INCLUDES", "EXTRA_MODULES", "GEMINI_KEY_ENV", "InputError", "UsageError", "extra_for_module",
           "gemini_client", "import_or_name_extra", "missing_extra_message", "require_extra"]

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
EXTRA_INCLUDES: dict[str, tuple[str, ...]] = dict.fromkeys(("lab", "postgres", "proxy", "bots"), ("sqlite",))


class InputError(ValueError):
    """Input a user gave (a file, a setting, an argument) that cannot be used; subclassed per kind of input.

    The message is one sentence naming the file, field or setting and what would fix it.
    """


class UsageError(InputError):
    """A command line or environment that cannot work (a missing extra, a bad option value)."""


def extra_for_module(module: str) -> str | None:
    """The extra that installs ``module`` (a dotted name), or ``None`` when no extra does."""
    top = module.split(".", 1)[0]
    return next((extra for extra, modules in EXTRA_MODULES.items() if top in modules), None)


def missing_extra_message(what: str, module: str, extra: str) -> str:
    """One sentence: ``what`` needs ``module``, which the extra installs."""
    missing = f"{module.split('.', 1)[0]} is not installed"
    return f"{what} needs the '{extra}' extra ({missing}); install it with: pip install \"pipecat-harness[{extra}]\""


def require_extra(what: str, module: str, extra: str) -> None:
    """Import ``module`` or raise :class:`UsageError` naming the extra to install."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise UsageError(missing_extra_message(what, module, extra)) from exc


def import_or_name_extra(module: str, what: str, extra: str | None = None) -> Any:
    """Import ``module`` for ``what``; when a module an extra installs is missing, raise :class:`UsageError` naming it.

    It names ``extra`` (a command's own) when that installs the missing module itself or through one it includes.
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
    """A ``google.genai.Client`` for ``what`` from the environment's key (else a UsageError naming ``alternative``)."""
    require_extra(what, "google.genai", "gemini")
    if not any(os.environ.get(name) for name in GEMINI_KEY_ENV):
        raise UsageError(f"{what} needs a Gemini API key; set GOOGLE_API_KEY (or GEMINI_API_KEY), or {alternative}")
    from google import genai

    return genai.Client()

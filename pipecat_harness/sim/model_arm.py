"""A real model in a simulated call: the bots' own Pipecat LLM service, pointed at a provider.

The key is read from the environment when the service is built (in the worker), never stored in a result.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from pipecat_harness.errors import GEMINI_KEY_ENV, UsageError, require_extra

__all__ = ["KEY_VARIABLES", "ModelArm", "ModelArmError", "ModelProvider"]

ModelProvider = Literal["gemini", "openai"]
#: The environment variables holding each provider's key (the first is the one messages name).
KEY_VARIABLES: dict[str, tuple[str, ...]] = {"gemini": GEMINI_KEY_ENV, "openai": ("OPENAI_API_KEY",)}

_GEMINI_OPENAI_URL = "https://generativelanguage.googleapis.com/v1beta/openai/"


@functools.cache
def _compatible_openai_service() -> type:
    """``OpenAILLMService`` sending an assistant tool-call message's ``null`` content as ``""``.

    Several OpenAI-compatible servers (llama-cpp-python's among them) refuse ``null`` there, which OpenAI accepts.
    """
    from pipecat.services.openai.llm import OpenAILLMService

    class CompatibleOpenAILLMService(OpenAILLMService):
        def build_chat_completion_params(self, params_from_context: Any) -> dict[str, Any]:
            params: dict[str, Any] = super().build_chat_completion_params(params_from_context)
            params["messages"] = [{**m, "content": ""} if m.get("role") == "assistant" and m.get("content") is None
                                  else m for m in params["messages"]]
            return params

    return CompatibleOpenAILLMService


class ModelArmError(UsageError):
    """A model option that cannot be used; the message names the option or variable."""


@dataclass(frozen=True)
class ModelArm:
    """Which real model answers in the simulated calls, and how it samples.

    Parameters:
        provider: ``gemini`` or ``openai`` (any OpenAI-compatible endpoint).
        name: The provider's model name.
        base_url: API root (``None``: the provider's default endpoint).
        temperature: Sampling temperature sent with every request.
        seed: Sampling seed sent with every request.
        max_tokens: Output limit sent with every request (``None``: the provider's default, for some servers none).
    """

    provider: ModelProvider
    name: str
    base_url: str | None = None
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int | None = None

    @classmethod
    def parse(cls, spec: str, *, base_url: str | None = None, temperature: float = 0.0, seed: int = 0,
              env: Mapping[str, str] | None = None, option: str = "--model", max_tokens: int | None = None) -> ModelArm:
        """Read ``provider:name`` and check it, the sampling options and that the provider's key is set."""
        provider, _, name = spec.partition(":")
        if provider not in KEY_VARIABLES or not name.strip():
            raise ModelArmError(f"{option} {spec!r}: write it as gemini:<model> or openai:<model> "
                                "(e.g. gemini:gemini-2.5-flash)")
        if not 0.0 <= temperature <= 2.0:
            raise ModelArmError(f"--temperature {temperature:g}: give a value between 0 and 2")
        if max_tokens is not None and not 0 < max_tokens <= 100_000:
            raise ModelArmError(f"--max-tokens {max_tokens}: give a whole number between 1 and 100000")
        if base_url is not None and not base_url.startswith(("http://", "https://")):
            raise ModelArmError(f"{option} {spec}: the base URL {base_url!r} is not a URL; give an http:// or "
                                "https:// one")
        if provider == "gemini":
            require_extra(f"{option} gemini:", "google.genai", "gemini")
        environment = env if env is not None else os.environ
        if not any(environment.get(name) for name in KEY_VARIABLES[provider]):
            raise ModelArmError(f"{option} {spec}: set {KEY_VARIABLES[provider][0]} to the {provider} API key "
                                "(it is not set)")
        return cls(provider, name.strip(), base_url, temperature, seed, max_tokens)  # type: ignore[arg-type]

    @property
    def label(self) -> str:
        """``provider:name``."""
        return f"{self.provider}:{self.name}"

    def to_dict(self) -> dict[str, Any]:
        """What results.json records (no key)."""
        return {**asdict(self), "label": self.label}

    def chat_endpoint(self) -> tuple[str | None, str]:
        """The OpenAI-compatible API root (``None``: OpenAI's) and key for plain chat requests (the LLM caller's)."""
        default = _GEMINI_OPENAI_URL if self.provider == "gemini" else None
        return self.base_url or default, self._key()

    def _key(self) -> str:
        key = next((os.environ[name] for name in KEY_VARIABLES[self.provider] if os.environ.get(name)), None)
        if not key:
            variable = KEY_VARIABLES[self.provider][0]
            raise ModelArmError(f"model {self.label}: set {variable} to the {self.provider} API key (it is not set)")
        return key

    def build_service(self, system_instruction: str | None) -> Any:
        """The Pipecat LLM service for this model, as the bots build it (a ModelArmError when the key is not set)."""
        key = self._key()
        service: Any
        if self.provider == "openai":
            from pipecat.services.openai.llm import OpenAILLMService

            service = OpenAILLMService if self.base_url is None else _compatible_openai_service()
            endpoint: dict[str, Any] = {"base_url": self.base_url}
        else:
            from google.genai.types import HttpOptions
            from pipecat.services.google.llm import GoogleLLMService

            service = GoogleLLMService
            options = HttpOptions(base_url=self.base_url, api_version="v1beta") if self.base_url else None
            endpoint = {"http_options": options}
        sampling = {"temperature": self.temperature, "seed": self.seed}
        settings = service.Settings(model=self.name, system_instruction=system_instruction, **sampling)
        if self.max_tokens:  # OpenAI: max_tokens, not max_completion_tokens (the name compatible servers read)
            settings.max_tokens = self.max_tokens
        return service(api_key=key, settings=settings, **endpoint)

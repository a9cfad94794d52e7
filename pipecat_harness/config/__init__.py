"""``HarnessConfig``: one switch and one settings block per control, with domain presets.

Settings load from keyword arguments, then environment variables (``PIPECAT_HARNESS_<BLOCK>__<FIELD>``, e.g.
``PIPECAT_HARNESS_TOOL_GATE__ENABLED=false``), then a YAML file::

    config = HarnessConfig.from_yaml("harness.yaml")        # env still overrides the file
    config = HarnessConfig.preset("airline")                  # domain defaults
    config = config.with_controls(tool_gate=False)            # switch one control off
"""

from __future__ import annotations

import contextvars
import os
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, InitSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from pipecat_harness.config.call_blocks import (
    CallStateSettings,
    Domain,
    HistorySettings,
    IdentifierHoldSettings,
    RetrievalSettings,
    SilentReplySettings,
    SpellingSettings,
    ToolGateSettings,
    TraceSettings,
    check_database_url,
)
from pipecat_harness.config.service_blocks import ChecklistSettings, GraderSettings, ProxySettings
from pipecat_harness.errors import InputError
from pipecat_harness.validation import describe_validation_error, is_sensitive, load_mapping_file

__all__ = ["CONTROL_NAMES", "CallStateSettings", "ChecklistSettings", "ConfigError", "Domain", "GraderSettings",
           "HarnessConfig", "HistorySettings", "IdentifierHoldSettings", "ProxySettings", "RetrievalSettings",
           "SilentReplySettings", "SpellingSettings", "ToolGateSettings", "TraceSettings", "check_database_url",
           "describe_config_error", "env_name"]

#: The switchable controls, by the name used in configs, scenarios and ``eval --toggle``.
CONTROL_NAMES = tuple("identifier_hold spelling silent_reply tool_gate history checklist grader call_state".split())

_yaml_source: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("_yaml_source", default=None)


class ConfigError(InputError):
    """A configuration that cannot be used; the message names the source and the field."""


_DOMAIN_PRESETS: dict[str, dict[str, Any]] = {domain: {"identifier_hold": {"domain": domain, "extra_wait_secs": wait}}
                                              for domain, wait in (("retail", 2.5), ("airline", 2.5), ("telecom", 1.5))}


class HarnessConfig(BaseSettings):
    """The harness configuration: one block per control."""

    model_config = SettingsConfigDict(env_prefix="PIPECAT_HARNESS_", env_nested_delimiter="__", extra="forbid",
                                      validate_default=True)

    domain: Domain = "retail"
    identifier_hold: IdentifierHoldSettings = Field(default_factory=IdentifierHoldSettings)
    spelling: SpellingSettings = Field(default_factory=SpellingSettings)
    silent_reply: SilentReplySettings = Field(default_factory=SilentReplySettings)
    tool_gate: ToolGateSettings = Field(default_factory=ToolGateSettings)
    history: HistorySettings = Field(default_factory=HistorySettings)
    checklist: ChecklistSettings = Field(default_factory=ChecklistSettings)
    grader: GraderSettings = Field(default_factory=GraderSettings)
    call_state: CallStateSettings = Field(default_factory=CallStateSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    trace: TraceSettings = Field(default_factory=TraceSettings)
    proxy: ProxySettings = Field(default_factory=ProxySettings)

    def __init__(self, **values: Any) -> None:
        """Build from keyword arguments, the environment and :meth:`from_yaml`'s file (``ConfigError``: a bad value)."""
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConfigError(describe_config_error(exc)) from exc
        except ValueError as exc:  # a block's own post-init check: its message names the setting
            raise ConfigError(str(exc)) from exc

    @classmethod
    def settings_customise_sources(
            cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource) -> tuple[PydanticBaseSettingsSource, ...]:
        """Keyword arguments, then environment, then the YAML file given to :meth:`from_yaml`."""
        return init_settings, env_settings, InitSettingsSource(settings_cls, dict(_yaml_source.get() or {}))

    @classmethod
    def from_yaml(cls, path: str | Path) -> HarnessConfig:
        """Load a YAML file; environment variables override its values (``ConfigError``: unreadable or invalid)."""
        path = Path(path)
        raw = load_mapping_file(path, what="config", error=ConfigError)
        token = _yaml_source.set(_merge(_DOMAIN_PRESETS.get(str(raw.get("domain")), {}), raw))
        try:
            return cls()
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from exc
        finally:
            _yaml_source.reset(token)

    @classmethod
    def preset(cls, domain: Domain, **overrides: Any) -> HarnessConfig:
        """Return the defaults for a domain (``retail``, ``airline``, ``telecom``)."""
        if domain not in _DOMAIN_PRESETS:
            raise ConfigError(f"unknown domain {domain!r}; choose one of {sorted(_DOMAIN_PRESETS)}")
        return cls(**_merge({"domain": domain, **_DOMAIN_PRESETS[domain]}, overrides))

    def with_controls(self, **switches: bool) -> HarnessConfig:
        """Return a copy with the named controls switched on or off (``ConfigError`` for a name that is none)."""
        unknown = set(switches) - set(CONTROL_NAMES)
        if unknown:
            raise ConfigError(f"unknown control(s) {sorted(unknown)}; controls are {list(CONTROL_NAMES)}")
        update = {name: getattr(self, name).model_copy(update={"enabled": on}) for name, on in switches.items()}
        return self.model_copy(update=update)

    def only(self, *controls: str) -> HarnessConfig:
        """Return a copy with exactly the named controls enabled."""
        return self.with_controls(**{name: name in controls for name in CONTROL_NAMES})

    def enabled_controls(self) -> frozenset[str]:
        """Names of the controls switched on."""
        return frozenset(name for name in CONTROL_NAMES if getattr(self, name).enabled)


def env_name(location: tuple[int | str, ...]) -> str:
    """The variable that sets a config field: ``("tool_gate", "enabled")`` → ``PIPECAT_HARNESS_TOOL_GATE__ENABLED``."""
    return "PIPECAT_HARNESS_" + "__".join(str(p).upper() for p in location if not isinstance(p, int))


def describe_config_error(error: ValidationError) -> str:
    """Describe a config validation error, naming the environment variable a bad value came from."""
    described = describe_validation_error(error, model=HarnessConfig)
    for item in error.errors():
        loc = item["loc"]
        for end in range(len(loc), 0, -1):
            name = env_name(loc[:end])
            if name in os.environ:
                value = "" if is_sensitive(loc[:end], os.environ[name]) else f"={os.environ[name]!r}"
                return f"environment variable {name}{value}: {described}"
    return described


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    return {**base, **{key: _merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict)
                       else value for key, value in override.items()}}

"""``HarnessConfig``: one switch and one settings block per control, with domain presets.

Settings load from keyword arguments, environment variables
(``PIPECAT_HARNESS_<BLOCK>__<FIELD>``, e.g.
``PIPECAT_HARNESS_TOOL_GATE__ENABLED=false``) and a YAML file, in that order
of precedence::

    config = HarnessConfig.from_yaml("harness.yaml")        # env still overrides the file
    config = HarnessConfig.preset("airline")                  # domain defaults
    config = config.with_controls(tool_gate=False)            # switch one control off
"""

from __future__ import annotations

import contextvars
import datetime as dt
import importlib
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from pipecat_harness.errors import InputError
from pipecat_harness.validation import describe_validation_error, is_sensitive, load_mapping_file

__all__ = [
    "CONTROL_NAMES",
    "CallStateSettings",
    "ChecklistSettings",
    "ConfigError",
    "Domain",
    "GraderSettings",
    "HarnessConfig",
    "HistorySettings",
    "IdentifierHoldSettings",
    "ProxySettings",
    "RetrievalSettings",
    "SilentReplySettings",
    "SpellingSettings",
    "ToolGateSettings",
    "TraceSettings",
    "check_database_url",
    "describe_config_error",
    "env_name",
]

Domain = Literal["retail", "airline", "telecom"]

#: The switchable controls, by the name used in configs, scenarios and ``eval --toggle``.
CONTROL_NAMES = (
    "identifier_hold", "spelling", "silent_reply", "tool_gate", "history", "checklist", "grader", "call_state",
)

_yaml_source: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("_yaml_source", default=None)


class ConfigError(InputError):
    """A configuration that cannot be used; the message names the source and the field."""


# The async drivers a database URL may name, with the module and extra each needs.
_DATABASE_DRIVERS = {"sqlite+aiosqlite": ("aiosqlite", None), "postgresql+asyncpg": ("asyncpg", "postgres")}


def _require_module(module: str, extra: str, what: str) -> None:
    try:
        importlib.import_module(module)
    except ModuleNotFoundError:
        raise ValueError(f"{what} needs the '{extra}' extra ({module} is not installed); "
                         f"install it with: pip install \"pipecat-harness[{extra}]\"") from None


def check_database_url(url: str) -> str:
    """Check that a database URL names an async driver that is installed; return it unchanged.

    Raises:
        ValueError: Not a URL, a synchronous driver, or a driver whose extra is missing.
    """
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme not in _DATABASE_DRIVERS:
        if scheme.split("+")[0] in {"postgresql", "postgres"}:
            raise ValueError(f"{url.split('@')[-1]!r} needs the async driver: write postgresql+asyncpg://... "
                             "(and install pipecat-harness[postgres])")
        raise ValueError(f"{scheme or url!r} is not a supported database URL; use sqlite+aiosqlite:///FILE or "
                         "postgresql+asyncpg://USER@HOST/DB")
    module, extra = _DATABASE_DRIVERS[scheme]
    if extra is not None:
        _require_module(module, extra, f"a {scheme.split('+')[0]} URL")
    return url


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid")


class IdentifierHoldSettings(_Block):
    """Hold a user turn that ends mid-identifier (input control).

    Parameters:
        enabled: Switch.
        domain: Which identifier formats to recognise.
        extra_wait_secs: Additional wait after the stop strategy fired.
        max_hold_secs: Longest total hold for one turn.
        exempt_digit_lengths: Digit-string lengths never held (complete as said).
        exempt_min_digits: Digit strings at least this long are never held (a full phone number).
    """

    enabled: bool = True
    domain: Domain = "retail"
    extra_wait_secs: float = Field(default=2.5, ge=0, le=30)
    max_hold_secs: float = Field(default=6.0, ge=0, le=60)
    exempt_digit_lengths: list[int] = Field(default_factory=lambda: [5])
    exempt_min_digits: int = Field(default=10, ge=1)


class SpellingSettings(_Block):
    """Rewrite ASR spelling artifacts before the user aggregator (input control).

    Parameters:
        enabled: Switch.
        as_in: Rewrite glued "YAsInYellow" into "Y as in Yellow".
        letter_digit_runs: Separate runs of letters and digits the ASR glued together.
        dotted_letters: Read "J.O.H.N." as spelled letters.
        split_connectors: Join a connector word the ASR split in two ("Under score" -> "underscore").
        number_readings: After an identifier cue, read digits the ASR wrote as a number back as digits
            ("zip code is 8.9" -> "8 9").
    """

    enabled: bool = True
    as_in: bool = True
    letter_digit_runs: bool = True
    dotted_letters: bool = True
    split_connectors: bool = True
    number_readings: bool = True


class SilentReplySettings(_Block):
    """Re-ask when speech was heard but no transcript arrived during a pending confirmation.

    Parameters:
        enabled: Switch.
        window_secs: How long after the speech a transcript may still arrive before re-asking.
        max_reasks: Most re-asks per pending confirmation.
        prompt: What the bot says when it re-asks.
        infer_from_assistant: Treat an assistant question that asks for yes or no as a pending confirmation.
    """

    enabled: bool = True
    window_secs: float = Field(default=1.5, gt=0, le=30)
    max_reasks: int = Field(default=1, ge=0, le=5)
    prompt: str = "Sorry, I didn't catch that. Could you say yes or no?"
    infer_from_assistant: bool = True


class ToolGateSettings(_Block):
    """Decide what tool calls are forwarded (tool control).

    Parameters:
        enabled: Switch.
        write_tools: Names of the tools that change business state.
        read_tools: Names of the tools that only read (every gated tool is declared one or the other).
        handler_timeout_secs: After this a write's outcome is unknown.
        max_argument_bytes: Largest accepted arguments payload.
        late_reply_secs: How long a timed-out write may still reply and settle its outcome.
        ledger_url: Operation ledger database (``sqlite+aiosqlite:///ledger.db``,
            ``postgresql+asyncpg://user@host/db``); empty keeps operations in memory.
        ledger_table_prefix: Prefix of the ledger's table names.
        tenant: Tenant of the ledger records.
        server_context_fields: Argument names only trusted code may set.
    """

    enabled: bool = True
    write_tools: list[str] = Field(default_factory=list)
    read_tools: list[str] = Field(default_factory=list)
    handler_timeout_secs: float = Field(default=10.0, gt=0, le=600)
    max_argument_bytes: int = Field(default=16_384, gt=0)
    late_reply_secs: float = Field(default=300.0, ge=0, le=3600)
    ledger_url: str = ""
    ledger_table_prefix: str = Field(default="harness_", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,40}$")
    tenant: str = Field(default="default", min_length=1, max_length=128)
    server_context_fields: list[str] = Field(default_factory=lambda: ["tenant_id", "customer_id"])

    @field_validator("ledger_url")
    @classmethod
    def _ledger_url(cls, value: str) -> str:
        return check_database_url(value) if value else value


class HistorySettings(_Block):
    """Keep only what the caller heard in history after an interruption (history control).

    Parameters:
        enabled: Switch.
        marker: Add a marker the model can see where a reply was cut off.
        marker_text: The marker; ``{heard}``, ``{tail}`` (last words heard) and
            ``{unheard_words}`` are filled in.
        keep_after_removals: After a reply was removed in full this many times, keep it.
        bias: Share of a word's audio that must have played for it to count as heard
            (0.5 = its middle; higher keeps less).
        chars_per_sec: Speaking rate (letters per second) assumed until the call's own is measured.
    """

    enabled: bool = True
    marker: bool = True
    marker_text: str = "[interrupted by the caller here; the rest was not heard]"
    keep_after_removals: int = Field(default=2, ge=1, le=10)
    bias: float = Field(default=0.7, ge=0.5, le=1.0)
    chars_per_sec: float = Field(default=13.75, gt=1, le=60)


class CallStateSettings(_Block):
    """Keep the call's working state, show it to the model read-only, bind writes to the caller's confirmation.

    Parameters:
        enabled: Switch.
        render: Show the model a compact read-only rendering of the state before each run (a system
            message at the end of the context; off by default because a provider adapter may turn a
            trailing system message into a user turn).
        confirm_tools: Write tools that run only after a later caller turn confirmed the same arguments.
        verified_tools: Write tools that run only once the caller's identity is verified.
        identity_tools: Tools whose successful result verifies the caller's identity.
        store: ``memory`` or ``redis`` (shared by workers). Confirmation proposals are kept in Redis
            with ``redis``, else in the operation ledger's database when ``tool_gate.ledger_url`` is set
            (SQLite or PostgreSQL), else in the worker only.
        redis_url: Redis server for ``store: redis``.
        tool_results: What the model receives for a gated call: ``operation`` (the operation record's
            rendering: status, operation id, user-safe result fields; the same for every provider) or
            ``raw`` (the handler's result as it returned it).
        internal_result_fields: Result fields never shown to the model (besides ``_``-prefixed fields
            and secrets such as passwords and tokens).
        context_budget_tokens: Summarise older dialogue past this many context tokens (Pipecat's
            estimate; ``None``: no budget). Constraints, corrections, refusals, open items and operation
            ids are checked to survive every summary.
        summarize_after_messages: Also summarise after this many new messages (with a budget set).
        keep_recent_messages: Recent messages always kept uncompressed.
    """

    enabled: bool = True
    render: bool = False
    confirm_tools: list[str] = Field(default_factory=list)
    verified_tools: list[str] = Field(default_factory=list)
    identity_tools: list[str] = Field(
        default_factory=lambda: ["find_user_id_by_email", "find_user_id_by_name_zip", "verify_caller"]
    )
    store: Literal["memory", "redis"] = "memory"
    redis_url: str = "redis://127.0.0.1:6379/0"
    tool_results: Literal["operation", "raw"] = "operation"
    internal_result_fields: list[str] = Field(default_factory=lambda: [
        "tenant_id", "idempotency_key", "request_hash", "owner", "lease_until", "internal_notes", "internal_id",
    ])
    context_budget_tokens: int | None = Field(default=None, gt=100)
    summarize_after_messages: int | None = Field(default=20, ge=2)
    keep_recent_messages: int = Field(default=4, ge=1, le=50)


class RetrievalSettings(_Block):
    """Policy evidence for the caller's latest turn, added before the model runs (placed with ``call_state``).

    The read tool (``lookup_policy``) needs no setting; this block is for pre-turn evidence. The search
    runs within ``budget_ms``; evidence that arrives later, or after the call's state version moved,
    is dropped rather than shown stale. The scope (tenant, products, call date) comes from trusted code:
    the tool gate's server context ``tenant_id`` when set, else ``tenant`` here, else ``tool_gate.tenant``.

    Parameters:
        pre_turn: Add evidence before each model run (off by default; needs ``call_state`` on).
        limit: Evidence items added (k).
        budget_ms: Longest wait for evidence (the design's retrieval budget is 150 ms).
        documents: Policy documents file (YAML) to index; empty: the bundled policy fixtures.
        index_url: Database of the lexical index (``sqlite+aiosqlite://`` in memory, or PostgreSQL).
        embeddings: Add embedding search (needs the ``embeddings`` extra).
        tenant: Tenant whose policies apply when the server context names none.
        products: Products the caller may ask about (general policies always apply).
        call_date: Day checked against effective dates (empty: today).
    """

    pre_turn: bool = False
    limit: int = Field(default=3, ge=1, le=20)
    budget_ms: float = Field(default=150.0, gt=0, le=5000)
    documents: str = ""
    index_url: str = "sqlite+aiosqlite://"
    embeddings: bool = False
    tenant: str = Field(default="", max_length=128)
    products: list[str] = Field(default_factory=list)
    call_date: dt.date | None = None

    @field_validator("index_url")
    @classmethod
    def _index_url(cls, value: str) -> str:
        return check_database_url(value)

    @field_validator("documents")
    @classmethod
    def _documents(cls, value: str) -> str:
        if value and not Path(value).is_file():
            raise ValueError(f"no policy documents file {value!r}")
        return value


class ChecklistSettings(_Block):
    """Inject the next checklist question before each model run.

    Parameters:
        enabled: Switch.
        checklist_path: A checklist YAML file; overrides ``checklist``.
        checklist: Name of a bundled checklist.
        directive_marker: Prefix of every directive line in the prompt.
        analyzer: ``rules`` (deterministic, offline) or ``gemini``.
        gemini_model: Model used by the Gemini analyzer.
        store: ``memory`` (one process) or ``redis`` (shared by workers).
        redis_url: Redis server for the ``redis`` store.
        key_prefix: Namespace for keys in the shared store.
        debounce_secs: Wait for a newer caller utterance before analysing.
        lock_ttl_secs: Lease of the per-call lock, renewed while analysis runs: the longest a
            lock left by a killed worker delays the call's next turn.
        work_timeout_secs: Longest the analysis of one turn may take.
        state_ttl_secs: How long a call's checklist state is kept after its last change.
        memory_max_keys: Most keys the in-process store keeps (least recently used go first).
    """

    enabled: bool = False
    checklist_path: str | None = None
    checklist: str = "site_check_in"
    directive_marker: str = Field(default="[CHECKLIST DIRECTIVE]", min_length=3)
    analyzer: Literal["rules", "gemini"] = "rules"
    gemini_model: str = "gemini-2.5-flash"
    store: Literal["memory", "redis"] = "memory"
    redis_url: str = "redis://127.0.0.1:6379/0"
    key_prefix: str = "pipecat-harness:"
    debounce_secs: float = Field(default=0.0, ge=0, le=5)
    lock_ttl_secs: float = Field(default=1.0, ge=0.05, le=60)
    work_timeout_secs: float = Field(default=10.0, gt=0, le=600)
    state_ttl_secs: float = Field(default=6 * 3600.0, gt=0, le=7 * 24 * 3600.0)
    memory_max_keys: int = Field(default=20_000, gt=0, le=10_000_000)

    @model_validator(mode="after")
    def _store_installed(self) -> ChecklistSettings:
        """Reject a store whose client is not installed (at start, not on the first call)."""
        if self.store == "redis":
            _require_module("redis", "redis", "checklist.store 'redis'")
        return self


class GraderSettings(_Block):
    """Grade every committed assistant turn off the voice loop.

    Parameters:
        enabled: Switch.
        constraints_path: The tenant's constraint list (YAML or JSON).
        queue_size: Turns waiting to be graded; beyond this a "not graded" row is written.
        mode: ``rules`` (offline default), ``llm`` (Gemini) or ``combined`` (rules, then the model).
        llm_model: Gemini model for ``llm`` and ``combined``.
        tenant: Tenant in audit rows (default: the constraint list's).
        audit_url: SQLAlchemy async URL of the audit store (SQLite or PostgreSQL).
        webhook_url: Where alerts are posted (none: no webhook).
        webhook_secret: HMAC key for the webhook signature.
        console_url: Base URL of the operator console, for links in alerts.
        critical_categories: Categories whose unsupported claims are critical.
        alert_min_severity: Lowest severity that triggers a webhook.
        webhook_max_attempts: Tries per alert.
        webhook_backoff_secs: Wait before the second try; doubles each try.
        webhook_format: Body of the webhook: ``harness`` (the design's payload), ``slack``, ``teams`` or
            ``pagerduty`` (Events API v2, with ``pagerduty_routing_key``).
        pagerduty_routing_key: Integration key for ``pagerduty``.
        alert_outbox_url: SQLAlchemy async URL of the outbox alerts are queued in before delivery, so that a
            queued alert survives a crash (none: an in-memory queue).
    """

    enabled: bool = False
    constraints_path: str | None = None
    queue_size: int = Field(default=256, gt=0)
    mode: Literal["rules", "llm", "combined"] = "rules"
    llm_model: str = "gemini-2.5-flash"
    tenant: str | None = None
    audit_url: str = "sqlite+aiosqlite:///grader_audit.db"
    webhook_url: str | None = None
    webhook_secret: str | None = None
    console_url: str | None = None
    critical_categories: list[Literal["price", "hours", "policy", "capability", "action"]] = Field(
        default=["price", "policy", "action"]
    )
    alert_min_severity: Literal["info", "warning", "critical"] = "critical"
    webhook_max_attempts: int = Field(default=4, ge=1, le=20)
    webhook_backoff_secs: float = Field(default=0.5, ge=0, le=60)
    webhook_format: Literal["harness", "slack", "teams", "pagerduty"] = "harness"
    pagerduty_routing_key: str | None = None
    alert_outbox_url: str | None = None

    @field_validator("audit_url")
    @classmethod
    def _audit_url(cls, value: str) -> str:
        return check_database_url(value)


class ProxySettings(_Block):
    """The custom-LLM proxy (``pipecat-harness proxy``): credentials, the operator's model settings, bounds.

    Secrets are lists so a rotation can keep the old and the new one valid at once;
    set them from the environment, e.g. ``PIPECAT_HARNESS_PROXY__SECRETS='["new","old"]'``.

    Parameters:
        secrets: Accepted on ``/chat/completions`` (Vapi custom-LLM credential key, or
            ``X-Vapi-Secret``) and on the Retell socket (``/llm-websocket/<secret>/{call_id}``).
        webhook_secrets: Vapi server-URL secrets for ``/webhook/vapi`` (default: ``secrets``).
        retell_api_keys: Retell API keys (webhook badge) that sign ``/webhook/retell``.
        signature_tolerance_secs: Largest clock difference on a signed webhook.
        model: Model sent upstream ("" uses ``--upstream-model``).
        max_tokens: Output limit of every model call.
        temperature: Temperature of every model call.
        tools: OpenAI function tools offered to the model.
        tool_choice: OpenAI ``tool_choice`` sent with the tools.
        base_prompt: Operator prompt, first in the stable system block.
        trust_platform_prompt: Also keep the platform's system messages.
        max_body_bytes: Largest request body or Retell frame.
        max_messages: Most messages per request.
        max_total_chars: Most content characters per request.
        max_call_id_chars: Longest call id.
        max_json_depth: Deepest JSON nesting.
        max_json_containers: Most JSON arrays and objects per request (counted before parsing).
    """

    secrets: list[str] = Field(default_factory=list)
    webhook_secrets: list[str] = Field(default_factory=list)
    retell_api_keys: list[str] = Field(default_factory=list)
    signature_tolerance_secs: float = Field(default=300.0, gt=0, le=3600)
    model: str = ""
    max_tokens: int = Field(default=400, gt=0, le=32_000)
    temperature: float = Field(default=0.0, ge=0, le=2)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: Any = None
    base_prompt: str = ""
    trust_platform_prompt: bool = False
    max_body_bytes: int = Field(default=1_000_000, gt=0, le=50_000_000)
    max_messages: int = Field(default=1_000, gt=0, le=100_000)
    max_total_chars: int = Field(default=200_000, gt=0, le=20_000_000)
    max_call_id_chars: int = Field(default=128, gt=0, le=1024)
    max_json_depth: int = Field(default=64, ge=4, le=500)
    max_json_containers: int = Field(default=20_000, ge=100, le=10_000_000)

    def model_post_init(self, context: Any, /) -> None:
        """Refuse empty secrets (an empty string would match an empty header)."""
        for name in ("secrets", "webhook_secrets", "retell_api_keys"):
            if any(not value for value in getattr(self, name)):
                raise ValueError(f"proxy.{name} must not contain empty strings")


class TraceSettings(_Block):
    """Where call timelines are written.

    Parameters:
        enabled: Write a JSONL timeline per call.
        directory: Directory of the timelines (one ``<call_id>.jsonl`` each).
    """

    enabled: bool = True
    directory: str = "traces"


_DOMAIN_PRESETS: dict[str, dict[str, Any]] = {
    "retail": {"identifier_hold": {"domain": "retail", "extra_wait_secs": 2.5}},
    "airline": {"identifier_hold": {"domain": "airline", "extra_wait_secs": 2.5}},
    "telecom": {"identifier_hold": {"domain": "telecom", "extra_wait_secs": 1.5}},
}


class HarnessConfig(BaseSettings):
    """The harness configuration: one block per control."""

    model_config = SettingsConfigDict(
        env_prefix="PIPECAT_HARNESS_", env_nested_delimiter="__", extra="forbid", validate_default=True
    )

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
        """Build from keyword arguments, the environment and the YAML file given to :meth:`from_yaml`.

        Raises:
            ConfigError: A value is invalid; the message names the setting (and
                the environment variable when the value came from one).
        """
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConfigError(describe_config_error(exc)) from exc
        except ValueError as exc:  # a block's own post-init check: its message names the setting
            raise ConfigError(str(exc)) from exc

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Keyword arguments, then environment, then the YAML file given to :meth:`from_yaml`."""
        return init_settings, env_settings, _YamlSource(settings_cls)

    @classmethod
    def from_yaml(cls, path: str | Path) -> HarnessConfig:
        """Load a YAML file; environment variables override its values.

        Raises:
            ConfigError: The file is unreadable, not a mapping, or invalid.
        """
        path = Path(path)
        raw = load_mapping_file(path, what="config", error=ConfigError)
        preset = raw.get("domain")
        data = _merge(_DOMAIN_PRESETS.get(str(preset), {}), raw)
        token = _yaml_source.set(data)
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
        """Return a copy with the named controls switched on or off.

        Raises:
            ConfigError: A name is not a control.
        """
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


class _YamlSource(PydanticBaseSettingsSource):
    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        data = _yaml_source.get() or {}
        return data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_yaml_source.get() or {})


def env_name(location: tuple[int | str, ...]) -> str:
    """The environment variable that sets a config field.

    ``("tool_gate", "enabled")`` → ``PIPECAT_HARNESS_TOOL_GATE__ENABLED``.
    """
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
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged

"""Settings blocks of the in-call controls (input, tools, history, call state, retrieval, trace); database URLs."""

from __future__ import annotations

import datetime as dt
import importlib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from pipecat_harness.errors import missing_extra_message

__all__ = ["CallStateSettings", "DatabaseUrl", "Domain", "HistorySettings", "IdentifierHoldSettings",
           "OptionalDatabaseUrl", "RetrievalSettings", "SilentReplySettings", "SpellingSettings", "ToolGateSettings",
           "TraceSettings", "check_database_url", "require_module"]

Domain = Literal["retail", "airline", "telecom"]

_IDENTITY_TOOLS = "find_user_id_by_email find_user_id_by_name_zip verify_caller"
_VERIFICATION = {"find_user_id_by_email": ["email"], "find_user_id_by_name_zip": ["first_name", "last_name", "zip"]}
_INTERNAL_RESULT_FIELDS = "tenant_id idempotency_key request_hash owner lease_until internal_notes internal_id"
# The async drivers a database URL may name, with the module and extra each needs.
_DATABASE_DRIVERS = {"sqlite+aiosqlite": ("aiosqlite", None), "postgresql+asyncpg": ("asyncpg", "postgres")}


def require_module(module: str, extra: str, what: str) -> None:
    """Raise ``ValueError`` naming the extra to install when ``module`` is missing (``what`` needs it)."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError:
        raise ValueError(missing_extra_message(what, module, extra)) from None


def check_database_url(url: str) -> str:
    """Return ``url`` unchanged if it names an installed async driver, else raise ``ValueError`` saying the fix."""
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme not in _DATABASE_DRIVERS:
        if scheme.split("+")[0] in {"postgresql", "postgres"}:
            fix = "write postgresql+asyncpg://... (and install pipecat-harness[postgres])"
            raise ValueError(f"{url.split('@')[-1]!r} needs the async driver: {fix}")
        fix = "use sqlite+aiosqlite:///FILE or postgresql+asyncpg://USER@HOST/DB"
        raise ValueError(f"{scheme or url!r} is not a supported database URL; {fix}")
    module, extra = _DATABASE_DRIVERS[scheme]
    if extra is not None:
        require_module(module, extra, f"a {scheme.split('+')[0]} URL")
    return url


#: A settings field holding a database URL, checked by :func:`check_database_url`.
DatabaseUrl = Annotated[str, AfterValidator(check_database_url)]
#: The same, where an empty string means none.
OptionalDatabaseUrl = Annotated[str, AfterValidator(lambda url: check_database_url(url) if url else url)]


class Block(BaseModel):
    """A settings block: unknown fields are errors."""

    model_config = ConfigDict(extra="forbid")


class IdentifierHoldSettings(Block):
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


class SpellingSettings(Block):
    """Rewrite ASR spelling artifacts before the user aggregator (input control).

    Parameters:
        enabled: Switch.
        as_in: Rewrite glued "YAsInYellow" into "Y as in Yellow".
        spelled_letter_marks: Drop a stray "'d" fused onto a letter in a hyphen-spelled run ("Y-E'd-N" -> "Y-E-N").
        letter_digit_runs: Separate runs of letters and digits the ASR glued together.
        dotted_letters: Read "J.O.H.N." as spelled letters.
        split_connectors: Join a connector word the ASR split in two ("Under score" -> "underscore").
        number_readings: After an identifier cue, read a number reading as digits ("zip code is 8.9" -> "8 9").
    """

    enabled: bool = True
    as_in: bool = True
    spelled_letter_marks: bool = True
    letter_digit_runs: bool = True
    dotted_letters: bool = True
    split_connectors: bool = True
    number_readings: bool = True


class SilentReplySettings(Block):
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
    prompt: str = "Sorry, I didn't catch your answer. Could you say it again?"
    infer_from_assistant: bool = True


class ToolGateSettings(Block):
    """Decide what tool calls are forwarded (tool control).

    Parameters:
        enabled: Switch.
        write_tools: Names of the tools that change business state.
        read_tools: Names of the tools that only read (every gated tool is declared one or the other).
        handler_timeout_secs: After this a write's outcome is unknown.
        max_argument_bytes: Largest accepted arguments payload.
        late_reply_secs: How long a timed-out write may still reply and settle its outcome.
        ledger_url: Operation ledger database (``sqlite+aiosqlite:///ledger.db``, or PostgreSQL); empty: in memory.
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
    ledger_url: OptionalDatabaseUrl = ""
    ledger_table_prefix: str = Field(default="harness_", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,40}$")
    tenant: str = Field(default="default", min_length=1, max_length=128)
    server_context_fields: list[str] = Field(default_factory=lambda: ["tenant_id", "customer_id"])


class HistorySettings(Block):
    """Keep only what the caller heard in history after an interruption (history control).

    Parameters:
        enabled: Switch.
        marker: Add a marker the model can see where a reply was cut off.
        marker_text: The marker; ``{heard}``, ``{tail}`` (last words heard) and ``{unheard_words}`` are filled in.
        keep_after_removals: After a reply was removed in full this many times, keep it.
        bias: Share of a word's audio that must have played for it to count as heard (higher keeps less).
        chars_per_sec: Speaking rate (letters per second) assumed until the call's own is measured.
    """

    enabled: bool = True
    marker: bool = True
    marker_text: str = "[interrupted by the caller here; the rest was not heard]"
    keep_after_removals: int = Field(default=2, ge=1, le=10)
    bias: float = Field(default=0.7, ge=0.5, le=1.0)
    chars_per_sec: float = Field(default=13.75, gt=1, le=60)


class CallStateSettings(Block):
    """Keep the call's working state, show it to the model read-only, bind writes to the caller's confirmation.

    Parameters:
        enabled: Switch.
        render: Show the model a read-only rendering of the state before each run, as a trailing system
            message (off by default: a provider adapter may turn it into a user turn).
        confirm_writes: Every write tool runs only after the caller confirmed a read-back they heard (switching
            it off is logged, like each ``unconfirmed_tools`` entry).
        confirm_tools: Tools bound to confirmation besides the write tools (all of them with ``confirm_writes: false``).
        unconfirmed_tools: Write tools explicitly exempt from confirmation (each logged at the start).
        confirm_window_turns: Caller turns after a proposal within which it can be confirmed; later it expires.
        verified_tools: Write tools that run only for records the verified customer owns.
        identity_tools: Tools whose successful result verifies the caller (when no ``verification`` step is set).
        verification: Per tool, the request fields the returned record must match (checked against the backend's
            record, never the model's arguments alone); the verified customer is the record's ``customer_field``.
        customer_field: Field of a verification record naming the customer.
        owner_field: Field of a backend record naming the customer who owns it (an order's ``user_id``).
        store: ``memory`` or ``redis`` (shared by workers). Confirmation proposals are kept in Redis with
            ``redis``, else in the ledger's database when ``tool_gate.ledger_url`` is set, else in the worker.
        redis_url: Redis server for ``store: redis``.
        tool_results: What the model receives for a gated call: ``operation`` (the operation record's status, id
            and user-safe result fields, the same for every provider) or ``raw`` (the handler's result).
        internal_result_fields: Result fields never shown to the model (besides ``_``-prefixed fields and secrets).
        context_budget_tokens: Summarise older dialogue past this many context tokens (``None``: no budget);
            constraints, corrections, refusals, open items and operation ids are checked to survive it.
        summarize_after_messages: Also summarise after this many new messages (with a budget set).
        keep_recent_messages: Recent messages always kept uncompressed.
    """

    enabled: bool = True
    render: bool = False
    confirm_writes: bool = True
    confirm_tools: list[str] = Field(default_factory=list)
    unconfirmed_tools: list[str] = Field(default_factory=list)
    confirm_window_turns: int = Field(default=3, ge=1, le=20)
    verified_tools: list[str] = Field(default_factory=list)
    identity_tools: list[str] = Field(default_factory=lambda: _IDENTITY_TOOLS.split())
    verification: dict[str, list[str]] = Field(default_factory=lambda: {k: list(v) for k, v in _VERIFICATION.items()})
    customer_field: str = "user_id"
    owner_field: str = "user_id"
    store: Literal["memory", "redis"] = "memory"
    redis_url: str = "redis://127.0.0.1:6379/0"
    tool_results: Literal["operation", "raw"] = "operation"
    internal_result_fields: list[str] = Field(default_factory=lambda: _INTERNAL_RESULT_FIELDS.split())
    context_budget_tokens: int | None = Field(default=None, gt=100)
    summarize_after_messages: int | None = Field(default=20, ge=2)
    keep_recent_messages: int = Field(default=4, ge=1, le=50)


class RetrievalSettings(Block):
    """Policy evidence for the caller's latest turn, added before the model runs (placed with ``call_state``).

    Evidence that misses ``budget_ms`` or the call's state version is dropped rather than shown stale. The scope
    comes from trusted code: the tool gate's server context ``tenant_id``, else ``tenant``, else ``tool_gate.tenant``.

    Parameters:
        pre_turn: Add evidence before each model run (off by default; needs ``call_state`` on).
        limit: Evidence items added (k).
        budget_ms: Longest wait for evidence (the design's retrieval budget is 150 ms).
        documents: Policy documents file (YAML) to index; empty: the bundled policy fixtures.
        index_url: Database of the lexical index (``sqlite+aiosqlite://`` in memory, or PostgreSQL).
        embeddings: Add embedding search (all-MiniLM-L6-v2 int8 on onnxruntime; finds paraphrases sharing no
            word), loaded in the background from the pipeline's start, once per process and file version; a turn
            before that has no evidence. ``false``, or no ``retrieval`` extra (logged once): lexical only.
        tenant: Tenant whose policies apply when the server context names none.
        products: Products the caller may ask about (general policies always apply).
        call_date: Day checked against effective dates (empty: today).
    """

    pre_turn: bool = False
    limit: int = Field(default=3, ge=1, le=20)
    budget_ms: float = Field(default=150.0, gt=0, le=5000)
    documents: str = ""
    index_url: DatabaseUrl = "sqlite+aiosqlite://"
    embeddings: bool = True
    tenant: str = Field(default="", max_length=128)
    products: list[str] = Field(default_factory=list)
    call_date: dt.date | None = None

    @field_validator("documents")
    @classmethod
    def _documents(cls, value: str) -> str:
        if value and not Path(value).is_file():
            raise ValueError(f"no policy documents file {value!r}")
        return value


class TraceSettings(Block):
    """Where call timelines are written.

    Parameters:
        enabled: Write a JSONL timeline per call.
        directory: Directory of the timelines (one ``<call_id>.jsonl`` each).
    """

    enabled: bool = True
    directory: str = "traces"

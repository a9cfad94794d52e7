"""Settings blocks of the checklist driver, the per-turn grader and the custom-LLM proxy."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from pipecat_harness.config.call_blocks import Block, DatabaseUrl, require_module

__all__ = ["ChecklistSettings", "GraderSettings", "ProxySettings"]

_Category = Literal["price", "hours", "policy", "capability", "action"]
_ContentPart = Literal["image_url", "file_url", "file", "video_url", "input_audio"]


class ChecklistSettings(Block):
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
        lock_ttl_secs: Lease of the per-call lock, renewed while analysis runs (bounds a killed worker's delay).
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
            require_module("redis", "redis", "checklist.store 'redis'")
        return self


class GraderSettings(Block):
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
        webhook_format: Webhook body: ``harness``, ``slack``, ``teams`` or ``pagerduty`` (Events API v2, with its key).
        pagerduty_routing_key: Integration key for ``pagerduty``.
        alert_outbox_url: Async URL of the outbox alerts wait in before delivery, to survive a crash (none: audit_url).
    """

    enabled: bool = False
    constraints_path: str | None = None
    queue_size: int = Field(default=256, gt=0)
    mode: Literal["rules", "llm", "combined"] = "rules"
    llm_model: str = "gemini-2.5-flash"
    tenant: str | None = None
    audit_url: DatabaseUrl = "sqlite+aiosqlite:///grader_audit.db"
    webhook_url: str | None = None
    webhook_secret: str | None = None
    console_url: str | None = None
    critical_categories: list[_Category] = Field(default=["price", "policy", "action"])
    alert_min_severity: Literal["info", "warning", "critical"] = "critical"
    webhook_max_attempts: int = Field(default=4, ge=1, le=20)
    webhook_backoff_secs: float = Field(default=0.5, ge=0, le=60)
    webhook_format: Literal["harness", "slack", "teams", "pagerduty"] = "harness"
    pagerduty_routing_key: str | None = None
    alert_outbox_url: str | None = None


class ProxySettings(Block):
    """The custom-LLM proxy (``pipecat-harness proxy``): credentials, the operator's model settings, bounds.

    Secrets are lists so a rotation can keep the old and the new one valid at once; set them from the
    environment, e.g. ``PIPECAT_HARNESS_PROXY__SECRETS='["new","old"]'``.

    Parameters:
        secrets: Accepted on ``/chat/completions`` (Vapi credential key, or ``X-Vapi-Secret``) and on the
            Retell socket (``/llm-websocket/<secret>/{call_id}``).
        webhook_secrets: Vapi server-URL secrets for ``/webhook/vapi`` (default: ``secrets``).
        retell_api_keys: Retell API keys (webhook badge) that sign ``/webhook/retell``.
        signature_tolerance_secs: Largest clock difference on a signed webhook.
        model: Model sent upstream ("" uses ``--upstream-model``).
        max_tokens: Output limit of every model call.
        temperature: Temperature of every model call.
        tools: OpenAI function tools offered to the model.
        tool_choice: OpenAI ``tool_choice`` sent with the tools (``"auto"``, ``"none"``, ``"required"``
            or a named function; JSON from the environment).
        base_prompt: Operator prompt, first in the stable system block.
        trust_platform_prompt: Also keep the platform's system messages.
        content_parts: Content-part types besides text sent upstream (default: none, text only).
        upstream_system_blocks: Send the system prompt upstream as text blocks (default: one string).
        upstream_cache_control: Send it as blocks with the base marked ``cache_control`` (prompt-caching gateways).
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
    tool_choice: Literal["auto", "none", "required"] | dict[str, Any] | None = None
    base_prompt: str = ""
    trust_platform_prompt: bool = False
    content_parts: list[_ContentPart] = Field(default_factory=list)
    upstream_system_blocks: bool = False
    upstream_cache_control: bool = False
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

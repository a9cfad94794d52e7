"""Parsing and validating what Vapi and Retell send; anything unusable raises :class:`RequestError`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Required, get_args

from pydantic import ConfigDict, Field, StrictFloat, StrictInt, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict

__all__ = ["ALLOWED_ROLES", "ChatTurnRequest", "ConversationUpdate", "RequestError", "RetellEvent", "ended_call_id",
           "parse_chat_request", "parse_conversation_update", "parse_json_body", "parse_retell_event"]

_Role = Literal["system", "developer", "user", "assistant", "tool", "function"]
ALLOWED_ROLES = frozenset(get_args(_Role))


class RequestError(ValueError):
    """A request the proxy cannot serve.

    Args:
        status: HTTP status to answer with.
        message: What is wrong, naming the field.
        code: Short machine-readable code.
    """

    def __init__(self, status: int, message: str, code: str = "invalid_request") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code

    def to_body(self) -> dict[str, Any]:
        """OpenAI-style error body."""
        return {"error": {"message": self.message, "type": "invalid_request_error", "code": self.code}}


@dataclass
class ChatTurnRequest:
    """A validated chat-completions request."""

    call_id: str
    messages: list[dict[str, Any]]
    model: str = ""
    temperature: float | None = None
    max_tokens: int | None = None
    stream: bool = True
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class ConversationUpdate:
    """A conversation-update event: the call and its messages so far."""

    call_id: str
    messages: list[dict[str, Any]]


@dataclass
class RetellEvent:
    """A Retell webhook event (``call_started``, ``call_ended``, ``call_analyzed``, ...)."""

    event: str
    call_id: str


def parse_json_body(raw: bytes | str) -> Any:
    """Decode a JSON request body (a 400 when it is empty or not valid JSON)."""
    if not raw.strip():
        raise RequestError(400, "request body is empty; expected a JSON object", "empty_body")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError(400, f"request body is not valid JSON: {exc}", "malformed_json") from exc


def _call_id(body: Mapping[str, Any]) -> str | None:
    by_source = ((body.get("call"), ("id", "callId", "call_id")), (body.get("metadata"), ("call_id", "callId")),
                 (body, ("call_id", "callId")))
    for source, keys in by_source:
        if isinstance(source, Mapping):
            for key in keys:
                if isinstance(source.get(key), str | int) and str(source[key]).strip():
                    return str(source[key]).strip()
    return None


@with_config(ConfigDict(extra="allow"))
class _Message(TypedDict, total=False):
    role: Required[_Role]
    content: str | list[Any] | None


@with_config(ConfigDict(extra="allow"))
class _ChatBody(TypedDict, total=False):
    """The fields of a chat-completions body the proxy reads (the rest pass through untouched)."""

    messages: Required[Annotated[list[_Message], Field(min_length=1)]]
    max_tokens: Annotated[StrictInt, Field(gt=0)] | None
    max_completion_tokens: Annotated[StrictInt, Field(gt=0)] | None
    temperature: StrictFloat | StrictInt | None
    tools: list[dict[str, Any]] | None


_CHAT_BODY = TypeAdapter(_ChatBody)

#: Per top-level field (and ``messages[i].<field>``), the error code and what the field must be.
_FIELD_ERRORS = {
    "messages": ("invalid_messages", "must be a non-empty list of message objects"),
    "content": ("invalid_messages", "must be a string, a list of parts or null"),
    "max_tokens": ("invalid_max_tokens", "must be a positive integer"),
    "max_completion_tokens": ("invalid_max_tokens", "must be a positive integer"),
    "temperature": ("invalid_temperature", "must be a number"),
    "tools": ("invalid_tools", "must be a list of OpenAI tool objects"),
}


def _request_error(error: ValidationError, body: Mapping[str, Any]) -> RequestError:
    """The first problem pydantic found, as the proxy's one-sentence 400 naming the field."""
    first = error.errors(include_url=False)[0]
    loc = first["loc"]
    if loc[0] == "messages" and len(loc) >= 3 and loc[2] == "role":
        role = body["messages"][loc[1]].get("role")
        message = f"messages[{loc[1]}].role {role!r} is not one of {sorted(ALLOWED_ROLES)}"
        return RequestError(400, message, "unknown_role")
    if loc[0] == "messages" and len(loc) == 2:
        return RequestError(400, f"messages[{loc[1]}] must be an object", "invalid_messages")
    if loc[0] == "messages" and len(loc) >= 3:
        field_name, where = str(loc[2]), f"messages[{loc[1]}].{loc[2]}"
    else:
        field_name = where = str(loc[0])
    code, must = _FIELD_ERRORS.get(field_name, ("invalid_request", f"is invalid: {first['msg']}"))
    return RequestError(400, f"{where} {must}", code)


def parse_chat_request(body: Any) -> ChatTurnRequest:
    """Validate a chat-completions body as Vapi sends it (a 400 naming the missing or invalid field)."""
    if not isinstance(body, Mapping):
        raise RequestError(400, "request body must be a JSON object", "invalid_body")
    try:
        _CHAT_BODY.validate_python(body)
    except ValidationError as exc:
        raise _request_error(exc, body) from None
    call_id = _call_id(body)
    if call_id is None:
        raise RequestError(400, "missing call id: send the 'call' object with 'id' (Vapi metadataSendMode 'variable' "
                           "or 'destructured'), or metadata.call_id", "missing_call_id")
    # The body was parsed for this request alone: its message objects are used, not copied.
    temperature, metadata = body.get("temperature"), body.get("metadata")
    return ChatTurnRequest(call_id=call_id, messages=body["messages"], model=str(body.get("model") or ""),
                           temperature=None if temperature is None else float(temperature),
                           max_tokens=body.get("max_tokens", body.get("max_completion_tokens")),
                           stream=bool(body.get("stream", True)), tools=[dict(t) for t in body.get("tools") or []],
                           tool_choice=body.get("tool_choice"),
                           metadata=dict(metadata) if isinstance(metadata, Mapping) else {})


def ended_call_id(body: Any) -> str | None:
    """The call id of a Vapi ``end-of-call-report`` webhook body (``None`` for any other body)."""
    message = body.get("message") if isinstance(body, Mapping) else None
    if not isinstance(message, Mapping) or message.get("type") != "end-of-call-report":
        return None
    return _call_id(message) or _call_id(body)


def parse_conversation_update(body: Any) -> ConversationUpdate | None:
    """Parse a Vapi server-webhook body: ``None`` for other events, a 400 when malformed."""
    if not isinstance(body, Mapping) or not isinstance(body.get("message"), Mapping):
        raise RequestError(400, "webhook body must be an object with a 'message' object", "invalid_body")
    message = body["message"]
    if message.get("type") != "conversation-update":
        return None
    call_id = _call_id(message) or _call_id(body)
    if call_id is None:
        raise RequestError(400, "conversation-update without call.id", "missing_call_id")
    conversation = message.get("conversation")
    if isinstance(conversation, list):
        messages = [dict(m) for m in conversation if isinstance(m, Mapping) and m.get("role") in ALLOWED_ROLES]
    else:
        raw = message.get("messages")
        if not isinstance(raw, list):
            raise RequestError(400, "conversation-update needs 'conversation' or 'messages'", "invalid_messages")
        roles = {"user": "user", "bot": "assistant", "assistant": "assistant", "system": "system"}
        messages = [{"role": roles[str(m.get("role"))], "content": str(m.get("message") or m.get("content") or "")}
                    for m in raw if isinstance(m, Mapping) and str(m.get("role")) in roles]
    return ConversationUpdate(call_id=call_id, messages=messages)


def parse_retell_event(body: Any) -> RetellEvent:
    """Parse a Retell webhook body ``{"event": ..., "call": {"call_id": ...}}`` (a 400 when incomplete)."""
    if not isinstance(body, Mapping) or not isinstance(body.get("event"), str):
        raise RequestError(400, "Retell webhook body must be an object with an 'event' string", "invalid_body")
    call_id = _call_id(body)
    if call_id is None:
        raise RequestError(400, "Retell webhook event without call.call_id", "missing_call_id")
    return RetellEvent(event=body["event"], call_id=call_id)

"""The retail agent behind a Twilio phone number.

A FastAPI server with two endpoints:

* ``POST /``: the number's "A call comes in" webhook; answers TwiML that
  connects the call to a bidirectional media stream on ``/ws``;
* ``WS /ws``: the media stream. Pipecat's ``TwilioFrameSerializer`` turns
  8 kHz μ-law into 16 kHz PCM (Smart Turn needs 16 kHz), and the bot asks
  Twilio to echo ``mark`` events so the call's trace and the history
  controls get receipts of what the caller actually heard.

    python bots/twilio_bot.py            # then expose port 8765, e.g. ngrok http 8765
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs
from xml.sax.saxutils import quoteattr

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import Response
from loguru import logger
from pipecat.runner.utils import parse_telephony_websocket
from pipecat.serializers.twilio import TwilioFrameSerializer
from pipecat.transports.websocket.fastapi import FastAPIWebsocketParams, FastAPIWebsocketTransport

from bots.settings import PROVIDER_KEYS, TWILIO_REQUIREMENTS, BotSettings, startup_settings
from bots.twilio_marks import MarkEvent, PlaybackReceipts, TwilioMarkRequester, add_playback_receipts
from pipecat_harness.config import HarnessConfig
from pipecat_harness.history.marks import twilio_mark_message

__all__ = [
    "REQUIREMENTS",
    "TWILIO_AUDIO_OUT_SAMPLE_RATE",
    "CallRecord",
    "TwilioCall",
    "create_app",
    "marked_twilio_call",
    "twilio_call",
    "twilio_signature",
    "twiml_for_stream",
]

REQUIREMENTS = (*PROVIDER_KEYS, *TWILIO_REQUIREMENTS)

#: Twilio plays 8 kHz μ-law; synthesizing at 8 kHz avoids a resampling step.
TWILIO_AUDIO_OUT_SAMPLE_RATE = 8000

ServicesFactory = Callable[[BotSettings], Any]


def twiml_for_stream(stream_url: str, parameters: dict[str, str] | None = None) -> str:
    """TwiML connecting the call to a bidirectional media stream at ``stream_url``."""
    params = "".join(
        f"\n      <Parameter name={quoteattr(k)} value={quoteattr(v)} />" for k, v in (parameters or {}).items() if v
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        "<Response>\n"
        "  <Connect>\n"
        f"    <Stream url={quoteattr(stream_url)}>{params}\n"
        "    </Stream>\n"
        "  </Connect>\n"
        "</Response>\n"
    )


@dataclass
class TwilioCall:
    """The Twilio side of one call: transport, mark requester and receipts."""

    stream_sid: str
    call_sid: str | None
    transport: FastAPIWebsocketTransport
    receipts: PlaybackReceipts
    mark_requester: TwilioMarkRequester

    mark_interval_secs: float = 0.5

    def attach(self, agent: Any) -> None:
        """Write this call's marks on the agent's trace and give the history control its receipts.

        With the ``history`` control on, its playback tracker requests the
        marks (right after each written chunk of audio) and takes the echoes
        that prove playback; the requester before the output transport stands
        down so the call has one numbering of replies.
        """
        self.receipts.recorder = agent.harness.recorder
        history = agent.harness.control("history")
        tracker = getattr(history, "tracker", None)
        if tracker is None:
            return
        self.mark_requester.active = False
        stream_sid = self.stream_sid
        tracker.enable_marks(lambda name: twilio_mark_message(stream_sid, name), interval_secs=self.mark_interval_secs)

        def to_tracker(event: MarkEvent) -> None:
            if event.kind == "played":
                tracker.on_mark_received(event.name)

        self.receipts.add_listener(to_tracker)


def twilio_call(
    websocket: WebSocket,
    stream_sid: str | None,
    call_sid: str | None,
    *,
    auto_hang_up: bool = True,
    mark_interval_secs: float = 0.5,
) -> TwilioCall:
    """Build the transport of a Twilio media stream whose ``start`` message was already read.

    This server builds its own transport (rather than the runner's
    ``create_transport``) because it offers ``TWILIO_AUTO_HANG_UP``: the
    runner's serializer always hangs up, so it needs Twilio credentials even
    in a test. The marks are added the same way as under the runner
    (:func:`marked_twilio_call`).

    Args:
        websocket: The accepted media-stream WebSocket.
        stream_sid: ``start.streamSid``.
        call_sid: ``start.callSid``.
        auto_hang_up: Hang the call up through Twilio's REST API when the pipeline ends.
        mark_interval_secs: Seconds of audio between two playback marks.

    Raises:
        ValueError: The start message had no stream SID.
    """
    if not stream_sid:
        raise ValueError("the Twilio start message has no streamSid")
    serializer = TwilioFrameSerializer(
        stream_sid=stream_sid,
        call_sid=call_sid,
        account_sid=os.getenv("TWILIO_ACCOUNT_SID", "") or None,
        auth_token=os.getenv("TWILIO_AUTH_TOKEN", "") or None,
        api_key_sid=os.getenv("TWILIO_API_KEY", "") or None,
        api_key_secret=os.getenv("TWILIO_API_SECRET", "") or None,
        region=os.getenv("TWILIO_REGION", "") or None,
        edge=os.getenv("TWILIO_EDGE", "") or None,
        params=TwilioFrameSerializer.InputParams(auto_hang_up=auto_hang_up),
    )
    params = FastAPIWebsocketParams(
        audio_in_enabled=True, audio_out_enabled=True, add_wav_header=False, serializer=serializer
    )
    transport = FastAPIWebsocketTransport(websocket=websocket, params=params)
    return marked_twilio_call(transport, params, stream_sid, call_sid, mark_interval_secs=mark_interval_secs)


def marked_twilio_call(
    transport: FastAPIWebsocketTransport,
    params: FastAPIWebsocketParams,
    stream_sid: str | None,
    call_sid: str | None,
    *,
    mark_interval_secs: float = 0.5,
) -> TwilioCall:
    """Add playback marks to a built Twilio media-stream transport (the runner's or this server's).

    Args:
        transport: The call's transport, not started yet.
        params: The params it was built with (their serializer is wrapped to report marks).
        stream_sid: ``start.streamSid``.
        call_sid: ``start.callSid``.
        mark_interval_secs: Seconds of audio between two playback marks.

    Raises:
        ValueError: No stream SID, or the params carry no Twilio serializer.
    """
    if not stream_sid:
        raise ValueError("the Twilio start message has no streamSid")
    receipts = add_playback_receipts(params)
    requester = TwilioMarkRequester(stream_sid, interval_secs=mark_interval_secs)
    return TwilioCall(stream_sid, call_sid, transport, receipts, requester, mark_interval_secs)


@dataclass
class CallRecord:
    """A finished call, kept by the app for inspection."""

    call_sid: str
    trace_path: Path | None
    receipts: PlaybackReceipts
    agent: Any = None
    error: str | None = None


@dataclass
class _AppState:
    settings_factory: Callable[[], BotSettings]
    services_factory: ServicesFactory | None
    harness_config: HarnessConfig | None
    public_host: str
    auto_hang_up: bool
    mark_interval_secs: float
    auth_token: str | None = None
    calls: list[CallRecord] = field(default_factory=list)


def create_app(
    *,
    settings_factory: Callable[[], BotSettings] = BotSettings.from_env,
    services_factory: ServicesFactory | None = None,
    harness_config: HarnessConfig | None = None,
    public_host: str | None = None,
    auto_hang_up: bool | None = None,
    mark_interval_secs: float = 0.5,
    auth_token: str | None = None,
) -> FastAPI:
    """The Twilio server.

    Args:
        settings_factory: Reads keys and settings for each call.
        services_factory: Builds STT, LLM and TTS for a call (default: the providers).
        harness_config: Instead of the config from the settings.
        public_host: Host Twilio reaches the server at (default ``TWILIO_PUBLIC_HOST``,
            else the webhook request's host).
        auto_hang_up: Hang up through the REST API at the end (default ``TWILIO_AUTO_HANG_UP``, on).
        mark_interval_secs: Seconds of audio between two playback marks.
        auth_token: Twilio auth token that signs webhook requests (default ``TWILIO_AUTH_TOKEN``).
            When set, a webhook request without a valid ``X-Twilio-Signature`` is refused with 403,
            so nobody but Twilio can start a call on this server.
    """
    if auth_token is None:
        auth_token = os.getenv("TWILIO_AUTH_TOKEN", "").strip() or None
    if auto_hang_up is None:
        auto_hang_up = os.getenv("TWILIO_AUTO_HANG_UP", "true").strip().lower() not in ("0", "false", "no", "off")
    state = _AppState(
        settings_factory=settings_factory,
        services_factory=services_factory,
        harness_config=harness_config,
        public_host=(public_host if public_host is not None else os.getenv("TWILIO_PUBLIC_HOST", "")).strip(),
        auto_hang_up=auto_hang_up,
        mark_interval_secs=mark_interval_secs,
        auth_token=auth_token,
    )
    app = FastAPI(title="pipecat-harness Twilio bot")
    app.state.bot = state

    @app.post("/")
    async def incoming_call(request: Request) -> Response:
        """Answer Twilio's incoming-call webhook with TwiML for the media stream."""
        form = {k: v[0] for k, v in parse_qs((await request.body()).decode("utf-8", "replace")).items()}
        host = state.public_host or request.headers.get("x-forwarded-host") or request.headers.get("host", "")
        if state.auth_token:
            url = f"https://{host}{request.url.path}" + (f"?{request.url.query}" if request.url.query else "")
            expected = twilio_signature(state.auth_token, url, form)
            if not hmac.compare_digest(expected, request.headers.get("x-twilio-signature", "")):
                logger.warning(f"refused a webhook request without a valid Twilio signature for {url}")
                return Response(content="invalid Twilio signature", status_code=403, media_type="text/plain")
        twiml = twiml_for_stream(
            f"wss://{host}/ws",
            {"from_number": form.get("From", ""), "to_number": form.get("To", "")},
        )
        logger.info(f"incoming call {form.get('CallSid', '?')} from {form.get('From', '?')}")
        return Response(content=twiml, media_type="application/xml")

    @app.websocket("/ws")
    async def media_stream(websocket: WebSocket) -> None:
        """Run one call on a Twilio media stream."""
        await websocket.accept()
        try:
            transport_type, call_data = await parse_telephony_websocket(websocket)
        except (ValueError, WebSocketDisconnect) as exc:
            logger.warning(f"media stream closed before it started: {exc}")
            return
        if transport_type != "twilio":
            logger.warning(f"not a Twilio media stream ({transport_type}); closing")
            await websocket.close(code=1003)
            return
        await _run_call(state, websocket, call_data)

    return app


def twilio_signature(auth_token: str, url: str, params: dict[str, str]) -> str:
    """Twilio's request signature: HMAC-SHA1 of the URL followed by each POST parameter's name and value, sorted."""
    payload = url + "".join(f"{name}{params[name]}" for name in sorted(params))
    digest = hmac.new(auth_token.encode("utf-8"), payload.encode("utf-8"), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


async def _run_call(state: _AppState, websocket: WebSocket, call_data: Any) -> None:
    from bots.agent import build_agent

    call_sid = call_data.get("call_id") or f"call-{uuid.uuid4().hex[:8]}"
    call = twilio_call(
        websocket, call_data.get("stream_id"), call_sid,
        auto_hang_up=state.auto_hang_up, mark_interval_secs=state.mark_interval_secs,
    )
    record = CallRecord(call_sid=call_sid, trace_path=None, receipts=call.receipts)
    try:
        settings = state.settings_factory()
        services = state.services_factory(settings) if state.services_factory else None
        agent = await build_agent(
            call.transport,
            settings=settings,
            bot_name="twilio",
            call_id=call_sid,
            services=services,
            harness_config=state.harness_config,
            audio_in_sample_rate=16000,
            audio_out_sample_rate=TWILIO_AUDIO_OUT_SAMPLE_RATE,
            before_output=[call.mark_requester],
        )
        call.attach(agent)
        record.agent, record.trace_path = agent, agent.trace_path
        await agent.run()
    except Exception as exc:
        record.error = f"{type(exc).__name__}: {exc}"
        logger.exception(f"call {call_sid} failed")
    finally:
        state.calls.append(record)


def main() -> None:
    """Check the keys, then serve on ``TWILIO_BOT_HOST:TWILIO_BOT_PORT`` (default 0.0.0.0:8765)."""
    settings, config = startup_settings("twilio_bot", REQUIREMENTS)
    import uvicorn

    host = os.getenv("TWILIO_BOT_HOST", "0.0.0.0")
    port_text = os.getenv("TWILIO_BOT_PORT", "8765")
    try:
        port = int(port_text)
    except ValueError:
        raise SystemExit(f"twilio_bot: TWILIO_BOT_PORT must be a port number, not {port_text!r}") from None
    print(f"twilio_bot: set your number's voice webhook to https://<public host>/ (POST); listening on {host}:{port}",
          flush=True)
    uvicorn.run(create_app(settings_factory=lambda: settings, harness_config=config), host=host, port=port)


if __name__ == "__main__":
    main()

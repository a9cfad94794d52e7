"""``pipecat-harness proxy``: serve the custom-LLM proxy for Vapi and Retell."""

from __future__ import annotations

import argparse
import dataclasses
import gc
import ipaddress
import json
import os
import sys
from typing import Any

from loguru import logger

from pipecat_harness.bundled import bundled_path
from pipecat_harness.checklist.control import build_driver
from pipecat_harness.cli import port_number
from pipecat_harness.config import HarnessConfig, ProxySettings
from pipecat_harness.errors import InputError, UsageError, require_extra
from pipecat_harness.proxy.app import create_app
from pipecat_harness.proxy.auth import ProxyAuth
from pipecat_harness.proxy.limits import ProxyLimits
from pipecat_harness.proxy.log_redaction import install_loguru_redaction, uvicorn_log_config
from pipecat_harness.proxy.policy import ModelPolicy
from pipecat_harness.proxy.service import ProxyService
from pipecat_harness.proxy.upstream import Upstream

__all__ = ["ARGS_ENV", "add_parser", "app_from_environment", "build_auth", "build_limits", "build_service",
           "build_upstream", "is_loopback"]

#: Environment variable through which ``--workers`` processes receive the command line's settings.
ARGS_ENV = "PIPECAT_HARNESS_PROXY_ARGS"


def build_upstream(kind: str, *, url: str | None = None, model: str = "", api_key_env: str = "OPENAI_API_KEY",
                   settings: ProxySettings | None = None) -> Upstream:
    """The upstream named on the command line (``ValueError`` for an unknown kind, or ``openai`` without URL).

    ``settings`` gives the system-prompt form sent upstream.
    """
    if kind == "scripted":
        from pipecat_harness.proxy.scripted import ScriptedUpstream

        return ScriptedUpstream(keep_requests=0)  # a served proxy has no one to inspect its requests
    if kind == "openai":
        from pipecat_harness.proxy.openai_upstream import OpenAICompatibleUpstream

        if not url:
            raise ValueError("--upstream openai needs --upstream-url (e.g. http://127.0.0.1:8001/v1)")
        return OpenAICompatibleUpstream(url, api_key=os.environ.get(api_key_env, "not-needed"), model=model,
                                        system_blocks=settings.upstream_system_blocks if settings else False,
                                        mark_cacheable=settings.upstream_cache_control if settings else False)
    if kind == "gemini":
        from pipecat_harness.proxy.gemini_upstream import GeminiUpstream

        return GeminiUpstream(model=model or "gemini-2.5-flash")
    raise ValueError(f"unknown upstream {kind!r}; choose scripted, openai or gemini")


# Rendered only when the level lets the line through: below it a decision costs no JSON encoding.
_DECISIONS = logger.opt(lazy=True)

# The lowest level the command's log sink writes (set with the sink; 0 until then: every level).
_SINK_LEVEL = {"no": 0}
_INFO_NO = logger.level("INFO").no


def _log_decision(action: str, evidence: dict[str, Any]) -> None:
    _DECISIONS.info("checklist {} {}", lambda: action, lambda: json.dumps(evidence, default=str)[:1000])


def _decisions_logged() -> bool:
    """Whether decision lines (``INFO``) get through the sink: below it, a turn's records are not built."""
    return _SINK_LEVEL["no"] <= _INFO_NO


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def build_auth(settings: ProxySettings) -> ProxyAuth:
    """The credentials of the config's ``proxy`` block."""
    return ProxyAuth(secrets=tuple(settings.secrets), webhook_secrets=tuple(settings.webhook_secrets),
                     retell_api_keys=tuple(settings.retell_api_keys), tolerance_secs=settings.signature_tolerance_secs)


def build_limits(settings: ProxySettings) -> ProxyLimits:
    """The bounds of the config's ``proxy`` block."""
    return ProxyLimits(**{limit.name: getattr(settings, limit.name) for limit in dataclasses.fields(ProxyLimits)})


def build_service(config: HarnessConfig, upstream: Upstream, *, with_checklist: bool = True) -> ProxyService:
    """A :class:`ProxyService` driven by the config's ``checklist`` block and the ``proxy`` block's model policy."""
    settings = config.checklist
    driver = None
    if with_checklist:
        driver = build_driver(settings, on_decision=_log_decision, decisions_wanted=_decisions_logged)
    policy = ModelPolicy.from_settings(config.proxy)
    return ProxyService(upstream, driver, marker=settings.directive_marker, policy=policy)


def _config(args: argparse.Namespace) -> HarnessConfig:
    """The config file with the command line's overrides (settles ``args.upstream_model`` too)."""
    config = HarnessConfig.from_yaml(args.config) if args.config else HarnessConfig()
    overrides = {name: getattr(args, name) for name in ("checklist", "checklist_path", "store", "redis_url")
                 if getattr(args, name)}
    if overrides:
        config = config.model_copy(update={"checklist": config.checklist.model_copy(update=overrides)})
    proxy = config.proxy
    if args.max_body_bytes is not None:
        proxy = proxy.model_copy(update={"max_body_bytes": args.max_body_bytes})
    if not args.upstream_model and proxy.model:
        args.upstream_model = proxy.model
    return config.model_copy(update={"proxy": proxy})


# Allocations between two young-generation collections (CPython's 700 made a burst of turns walk the
# streams in flight every few requests; a turn's temporaries die long before 50 000).
_YOUNG_COLLECTION_ALLOCATIONS = 50_000


def _freeze_startup_heap() -> None:
    # The startup heap lives as long as the process: frozen, a full collection scans only the requests' objects.
    gc.collect()
    gc.freeze()
    gc.set_threshold(_YOUNG_COLLECTION_ALLOCATIONS, 10, 10)


def _app(args: argparse.Namespace, config: HarnessConfig) -> Any:
    """The application (raises ``ValueError`` for an unusable upstream)."""
    upstream = build_upstream(args.upstream, url=args.upstream_url, model=args.upstream_model, settings=config.proxy)
    service = build_service(config, upstream, with_checklist=not args.no_checklist)
    app = create_app(service, retell_greeting=args.retell_greeting, auth=build_auth(config.proxy),
                     limits=build_limits(config.proxy))
    app.router.on_startup.append(_freeze_startup_heap)
    return app


def _credentials(config: HarnessConfig) -> list[str]:
    """Every credential the proxy holds: none of them is ever written to a log."""
    proxy = config.proxy
    upstream_key = os.environ.get("OPENAI_API_KEY", "")
    return [*proxy.secrets, *proxy.webhook_secrets, *proxy.retell_api_keys, *([upstream_key] if upstream_key else [])]


def _configure_logging(level: str, config: HarnessConfig) -> None:
    """Log at ``level``, every credential redacted, from a background thread (a line never waits on the loop)."""
    logger.remove()
    logger.add(sys.stderr, level=level.upper(), enqueue=True)
    _SINK_LEVEL["no"] = logger.level(level.upper()).no
    install_loguru_redaction(_credentials(config))


def app_from_environment() -> Any:
    """The proxy application for one ``--workers`` process, built from the settings in :data:`ARGS_ENV`."""
    args = argparse.Namespace(**json.loads(os.environ[ARGS_ENV]))
    config = _config(args)
    _configure_logging(args.log_level, config)
    return _app(args, config)


def _refuse(reason: str) -> int:
    print(f"pipecat-harness proxy: {reason}")
    return 2


def _run(args: argparse.Namespace) -> int:
    require_extra("pipecat-harness proxy", "uvicorn", "proxy")
    import uvicorn

    if args.checklist:
        try:
            bundled_path("checklist", args.checklist)
        except InputError as exc:
            raise UsageError(f"--checklist: {exc}") from exc
    config = _config(args)
    if not is_loopback(args.host) and not build_auth(config.proxy).secrets:
        return _refuse(f"refusing to serve on {args.host} without a secret; set proxy.secrets in the config or "
                       "PIPECAT_HARNESS_PROXY__SECRETS='[\"<secret>\"]' (or bind 127.0.0.1)")
    if args.workers < 1:
        return _refuse(f"--workers must be at least 1, not {args.workers}")
    if args.workers > 1 and not args.no_checklist and config.checklist.store != "redis":
        return _refuse("--workers above 1 needs --store redis: each call's checklist state must be shared by the "
                       "workers that serve its turns")
    try:
        app = _app(args, config)
    except ValueError as exc:
        return _refuse(str(exc))
    _configure_logging(args.log_level, config)
    # Access lines cost a log record per request on the serving path; --access-log turns them on.
    options: dict[str, Any] = {"host": args.host, "port": args.port, "log_level": args.log_level,
                               "access_log": args.access_log, "log_config": uvicorn_log_config(_credentials(config))}
    if args.workers == 1:
        uvicorn.run(app, **options)
        return 0
    # Each worker process builds its own application (its own store client, upstream session and loop).
    os.environ[ARGS_ENV] = json.dumps({k: v for k, v in vars(args).items() if k != "func"})
    uvicorn.run("pipecat_harness.proxy.command:app_from_environment", factory=True, workers=args.workers, **options)
    return 0


def add_parser(subparsers: Any) -> None:
    """Register the ``proxy`` subcommand."""
    parser = subparsers.add_parser("proxy", help="serve the custom-LLM proxy (Vapi SSE, Retell WebSocket)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=port_number, default=8000)
    parser.add_argument("--config", help="harness config YAML (the checklist block is used)")
    parser.add_argument("--upstream", choices=("scripted", "openai", "gemini"), default="scripted")
    parser.add_argument("--upstream-url", help="base URL of an OpenAI-compatible upstream")
    parser.add_argument("--upstream-model", default="", help="model name sent upstream")
    parser.add_argument("--checklist", help="bundled checklist name")
    parser.add_argument("--checklist-path", help="checklist YAML file")
    parser.add_argument("--store", choices=("memory", "redis"), help="per-call state backend")
    parser.add_argument("--redis-url", help="Redis URL for --store redis")
    parser.add_argument("--no-checklist", action="store_true", help="pass through without checklist directives")
    parser.add_argument("--max-body-bytes", type=int, help="largest request body (default: proxy.max_body_bytes)")
    parser.add_argument("--retell-greeting", default="", help="first agent line on a Retell call")
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--access-log", action="store_true", help="log one line per request")
    parser.add_argument("--workers", type=int, default=1,
                        help="worker processes sharing the port (above 1 needs --store redis)")
    parser.set_defaults(func=_run)

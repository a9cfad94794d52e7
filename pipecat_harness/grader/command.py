"""``pipecat-harness console`` and ``pipecat-harness grader eval FILE``."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

from pydantic import TypeAdapter, ValidationError
from sqlalchemy.exc import SQLAlchemyError

from pipecat_harness.cli import port_number
from pipecat_harness.errors import gemini_client, require_extra
from pipecat_harness.grader.audit import DEFAULT_AUDIT_URL, AuditStore
from pipecat_harness.grader.calibration import LABELED_SET_PATH, LabeledSet, evaluate
from pipecat_harness.grader.constraints import ConstraintError

__all__ = ["add_parser"]

_TOKEN_ENV = "PIPECAT_HARNESS_CONSOLE_TOKEN"
_TENANT_TOKENS_ENV = "PIPECAT_HARNESS_CONSOLE_TENANT_TOKENS"
_TENANT_TOKENS = TypeAdapter(dict[str, str | list[str]])


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``console`` and ``grader``."""
    console = subparsers.add_parser("console", help="serve the operator console of flagged turns")
    _audit_arguments(console)
    console.add_argument("--recordings", help="directory of call recordings (<call id>.wav, .mp3...)")
    console.add_argument("--traces",
                         help="directory of call traces (<call id>.jsonl); call pages show the handoff summary")
    console.add_argument("--host", default="127.0.0.1")
    console.add_argument("--port", type=port_number, default=8765)
    token_help = f"admin token, sees every tenant (default: ${_TOKEN_ENV}); optional with tenant tokens"
    console.add_argument("--token", default=os.environ.get(_TOKEN_ENV), help=token_help)
    console.set_defaults(func=_console)

    grader = subparsers.add_parser("grader", help="per-turn grader tools")
    actions = grader.add_subparsers(dest="grader_command", metavar="ACTION")
    eval_parser = actions.add_parser("eval", help="score a grader against a labeled set")
    eval_parser.add_argument("file", nargs="?", default=str(LABELED_SET_PATH),
                             help="labeled set (default: the shipped set)")
    eval_parser.add_argument("--mode", choices=["rules", "llm", "combined"], default="rules")
    eval_parser.add_argument("--model", default="gemini-2.5-flash", help="Gemini model for llm/combined")
    eval_parser.add_argument("--show-misses", action="store_true", help="list the misjudged utterances")
    eval_parser.add_argument("--min-recall", type=float, help="exit 1 below this overall recall")
    eval_parser.add_argument("--max-false-flags", type=float, help="exit 1 above this overall false-flag rate")
    eval_parser.set_defaults(func=_eval)
    cal_parser = actions.add_parser("calibrate",
                                    help="score the grader against operators' reviews of sampled audited turns")
    _audit_arguments(cal_parser)
    cal_parser.add_argument("--per-week", type=int, default=50,
                            help="rows sampled per tenant, week and stratum (flagged/unflagged)")
    cal_parser.add_argument("--seed", type=int, default=0, help="seed of the sample")
    cal_parser.add_argument("--tenant", help="only this tenant")
    cal_parser.add_argument("--since", help="first day, YYYY-MM-DD")
    cal_parser.add_argument("--until", help="last day, YYYY-MM-DD")
    cal_parser.add_argument("--show-unlabeled", action="store_true", help="list the sampled rows that await a review")
    cal_parser.set_defaults(func=_calibrate)
    grader.set_defaults(func=lambda args: (grader.print_help(), 2)[1])


def _audit_arguments(parser: argparse.ArgumentParser) -> None:
    url = os.environ.get("PIPECAT_HARNESS_GRADER__AUDIT_URL", DEFAULT_AUDIT_URL)
    parser.add_argument("--audit-url", default=url,
                        help="SQLAlchemy async URL of the audit store (default: %(default)s)")
    parser.add_argument("--table", default="grader_audit", help="audit table name")


def _tenant_tokens() -> dict[str, str | list[str]] | None:
    """Tenant tokens from ``$PIPECAT_HARNESS_CONSOLE_TENANT_TOKENS``; ``ValueError`` when it is not such JSON."""
    raw = os.environ.get(_TENANT_TOKENS_ENV)
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"${_TENANT_TOKENS_ENV} is not JSON: {exc}") from exc
    try:
        return _TENANT_TOKENS.validate_python(value, strict=True)
    except ValidationError:
        shape = '{"<token>": "<tenant>" or ["<tenant>", ...]}'
        raise ValueError(f"${_TENANT_TOKENS_ENV} must be a JSON object {shape}") from None


def _fail(message: str) -> int:
    print(message, file=sys.stderr)
    return 2


def _console(args: argparse.Namespace) -> int:
    try:
        tenant_tokens = _tenant_tokens()
    except ValueError as exc:
        return _fail(f"console: {exc}")
    if not args.token and not tenant_tokens:
        return _fail(f"console: a token is required (--token or ${_TOKEN_ENV}, or ${_TENANT_TOKENS_ENV})")
    require_extra("pipecat-harness console", "uvicorn", "proxy")
    require_extra("pipecat-harness console", "fastapi", "proxy")
    import uvicorn

    from pipecat_harness.grader.console import create_console_app

    store = AuditStore(args.audit_url, table_name=args.table)
    for flag, directory in (("--recordings", args.recordings), ("--traces", args.traces)):
        if directory and not os.path.isdir(directory):
            return _fail(f"console: {flag} {directory!r} is not a directory")
    try:
        app = create_console_app(store, args.token, tenant_tokens=tenant_tokens, recordings=args.recordings,
                                 traces=args.traces)
    except ValueError as exc:
        return _fail(f"console: {exc}")
    from sqlalchemy.engine import make_url

    from pipecat_harness.proxy.log_redaction import install_loguru_redaction, uvicorn_log_config

    tokens = [t for t in [args.token, *(tenant_tokens or {})] if t]
    install_loguru_redaction(tokens)
    audit = make_url(args.audit_url).render_as_string(hide_password=True)
    print(f"console on http://{args.host}:{args.port}/?token=<token>  (audit: {audit})")
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", log_config=uvicorn_log_config(tokens))
    return 0


def _eval(args: argparse.Namespace) -> int:
    try:
        labeled = LabeledSet.load(args.file)
    except ConstraintError as exc:
        return _fail(f"grader eval: {exc}")

    if args.mode != "rules":
        gemini_client(f"grader eval --mode {args.mode}", "use --mode rules")
    from pipecat_harness.config import GraderSettings
    from pipecat_harness.grader.control import build_grader

    settings = GraderSettings(mode=args.mode, llm_model=args.model)
    report = asyncio.run(evaluate(lambda constraints, ledger: build_grader(settings, constraints, ledger), labeled))
    print(report.table())
    if args.show_misses:
        for item, verdicts in report.misses:
            kind = "false flag" if item.grounded else "missed"
            said = "; ".join(f"{v.verdict}/{v.category}: {v.rationale}" for v in verdicts) or "no verdict"
            print(f"- {kind} [{item.category}] {item.text!r} -> {said}")
    return int((args.min_recall is not None and report.total.recall < args.min_recall) or (
        args.max_false_flags is not None and report.total.false_flag_rate > args.max_false_flags))


def _calibrate(args: argparse.Namespace) -> int:
    from datetime import date

    from pipecat_harness.grader.alerts import call_links
    from pipecat_harness.grader.audit_calibration import calibrate

    try:
        since, until = (date.fromisoformat(day) if day else None for day in (args.since, args.until))
    except ValueError as exc:
        return _fail(f"grader calibrate: --since/--until must be dates like 2026-05-31 ({exc})")
    if args.per_week < 1:
        return _fail("grader calibrate: --per-week must be at least 1")

    async def run() -> str:
        store = AuditStore(args.audit_url, table_name=args.table)
        try:
            await store.create_tables()
            report = await calibrate(store, per_week=args.per_week, seed=args.seed, tenant=args.tenant, since=since,
                                     until=until)
        finally:
            await store.close()
        text = report.table()
        if args.show_unlabeled:
            text += "".join(f"\n- row {row.id} {row.tenant} {row.verdict}/{row.category}: {row.utterance!r} "
                            f"{call_links(row.tenant, row.call_id, row.turn_id)['operator_console']}"
                            for row in report.unlabeled)
        return text

    try:
        print(asyncio.run(run()))
    except (OSError, ValueError, SQLAlchemyError) as exc:  # unreachable database, bad URL
        return _fail(f"grader calibrate: cannot read the audit store {args.audit_url}: {exc}")
    return 0

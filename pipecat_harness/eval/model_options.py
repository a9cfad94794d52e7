"""The ``eval`` options of a real-model run: the model, the caller model and the budget."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from pipecat_harness.eval.runner import Budget
from pipecat_harness.sim.model_arm import ModelArm

__all__ = ["MAX_ROUNDS", "ModelOptions", "add_model_arguments", "model_options"]

#: Rounds of a budgeted run with no ``--runs`` (also the most ``--runs`` accepts).
MAX_ROUNDS = 100


@dataclass(frozen=True)
class ModelOptions:
    """The real-model settings of one ``eval`` run."""

    model: ModelArm | None
    caller_model: ModelArm | None
    budget: Budget
    runs: int


def add_model_arguments(parser: Any) -> None:
    """Add ``--model``, ``--base-url``, ``--temperature``, ``--max-tokens``, ``--caller-model`` and the budgets."""
    add = parser.add_argument_group("real model (needs GOOGLE_API_KEY or OPENAI_API_KEY)").add_argument
    model = "PROVIDER:NAME"
    add(
        "--model",
        metavar=model,
        help="decide with a real model instead of the scripted one: gemini:<name> or openai:<name>",
    )
    add("--base-url", help="API root of the model (any OpenAI-compatible endpoint with openai:)")
    add(
        "--temperature",
        type=float,
        default=0.0,
        help="sampling temperature of the model (default 0; the seed is --seed)",
    )
    add(
        "--max-tokens",
        type=int,
        help="output limit of every model request, recorded in results.json (default: the "
        "provider's own, which some servers leave unlimited)",
    )
    add("--caller-model", metavar=model, help="model playing goal callers (default: the offline brain)")
    add("--caller-base-url", help="API root of the caller model (OpenAI-compatible)")
    add("--budget-calls", type=int, help="stop before a round would pass this many calls")
    add("--budget-tokens", type=int, help="stop before a round would pass this many model tokens")
    add("--budget-minutes", type=float, help="stop before a round would pass this many minutes")


def model_options(args: argparse.Namespace, runs_given: bool) -> ModelOptions:
    """Read and check the options (a ``ModelArmError`` for a bad model option, a ``ValueError`` for a bad budget)."""
    arm = dict(base_url=args.base_url, temperature=args.temperature, seed=args.seed, max_tokens=args.max_tokens)
    model = ModelArm.parse(args.model, **arm) if args.model else None
    if model is None and args.base_url:
        raise ValueError("--base-url goes with --model (the endpoint of that model)")
    if model is None and args.max_tokens is not None:
        raise ValueError("--max-tokens goes with --model (the output limit of that model)")
    caller = None
    if args.caller_model:
        caller = ModelArm.parse(
            args.caller_model, base_url=args.caller_base_url, seed=args.seed, option="--caller-model"
        )
    budget = Budget(args.budget_calls, args.budget_tokens, args.budget_minutes)
    for name, value in budget.to_dict().items():
        if value is not None and value <= 0:
            raise ValueError(f"--budget-{name} must be positive, got {value:g}")
    return ModelOptions(model, caller, budget, args.runs if runs_given or budget == Budget() else MAX_ROUNDS)

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
    group = parser.add_argument_group("real model (needs GOOGLE_API_KEY or OPENAI_API_KEY)")
    group.add_argument("--model", metavar="PROVIDER:NAME",
                       help="decide with a real model instead of the scripted one: gemini:<name> or openai:<name>")
    group.add_argument("--base-url", help="API root of the model (any OpenAI-compatible endpoint with openai:)")
    group.add_argument("--temperature", type=float, default=0.0,
                       help="sampling temperature of the model (default 0; the seed is --seed)")
    group.add_argument("--max-tokens", type=int,
                       help="output limit of every model request, recorded in results.json (default: the "
                            "provider's own, which some servers leave unlimited)")
    group.add_argument("--caller-model", metavar="PROVIDER:NAME",
                       help="model playing goal callers (default: the offline brain)")
    group.add_argument("--caller-base-url", help="API root of the caller model (OpenAI-compatible)")
    group.add_argument("--budget-calls", type=int, help="stop before a round would pass this many calls")
    group.add_argument("--budget-tokens", type=int, help="stop before a round would pass this many model tokens")
    group.add_argument("--budget-minutes", type=float, help="stop before a round would pass this many minutes")


def model_options(args: argparse.Namespace, runs_given: bool) -> ModelOptions:
    """Read and check the options.

    Raises:
        ModelArmError: A model option is malformed or its key variable is not set.
        ValueError: A budget is not positive.
    """
    max_tokens = args.max_tokens
    model = ModelArm.parse(args.model, base_url=args.base_url, temperature=args.temperature,
                           seed=args.seed, max_tokens=max_tokens) if args.model else None
    if model is None and args.base_url:
        raise ValueError("--base-url goes with --model (the endpoint of that model)")
    if model is None and max_tokens is not None:
        raise ValueError("--max-tokens goes with --model (the output limit of that model)")
    caller = ModelArm.parse(args.caller_model, base_url=args.caller_base_url, seed=args.seed,
                            option="--caller-model") if args.caller_model else None
    for option, value in (("--budget-calls", args.budget_calls), ("--budget-tokens", args.budget_tokens),
                          ("--budget-minutes", args.budget_minutes)):
        if value is not None and value <= 0:
            raise ValueError(f"{option} must be positive, got {value:g}")
    budget = Budget(args.budget_calls, args.budget_tokens, args.budget_minutes)
    budgeted = any(v is not None for v in (args.budget_calls, args.budget_tokens, args.budget_minutes))
    runs = args.runs if runs_given or not budgeted else MAX_ROUNDS
    return ModelOptions(model, caller, budget, runs)

"""``RuleGrader``: the deterministic, offline default grader (filler, questions and refusals give no verdict)."""

from __future__ import annotations

from collections.abc import Sequence

from pipecat_harness.grader.actions import OperationLedgerView, check_action_claim, find_action_claims
from pipecat_harness.grader.capabilities import check_capabilities
from pipecat_harness.grader.constraints import ConstraintList, PriceItem
from pipecat_harness.grader.hours import check_hours
from pipecat_harness.grader.policies import check_policies
from pipecat_harness.grader.prices import check_prices, find_services
from pipecat_harness.grader.verdict import Verdict
from pipecat_harness.numbers import read_numbers, split_sentences, tokenize

__all__ = ["RuleGrader"]


class RuleGrader:
    """Check an utterance's claims with deterministic rules; action claims need ``ledger`` (else ``out_of_scope``)."""

    model = "rules"

    def __init__(self, constraints: ConstraintList, ledger: OperationLedgerView | None = None) -> None:
        self.constraints = constraints
        self.ledger = ledger

    def check(self, agent_utterance: str, caller_utterance: str | None = None) -> list[Verdict]:
        """Grade price, hours, policy and capability claims (no ledger access, synchronous)."""
        verdicts: list[Verdict] = []
        service: PriceItem | None = None  # the service last named, for "That one's one forty-nine."
        caller = read_numbers(tokenize(caller_utterance or ""))
        asked = tuple(item for _, item in find_services(caller, self.constraints))
        for sentence in split_sentences(agent_utterance):
            tokens = read_numbers(tokenize(sentence))
            policies = check_policies(tokens, sentence, self.constraints)
            prices = check_prices(tokens, sentence, self.constraints, context=service, asked=asked)
            named = find_services(tokens, self.constraints)
            service = named[-1][1] if named else service
            if policies:  # fees and deposits are the policy's amounts, not the price list's
                prices = [v for v in prices if v.constraint_ref is not None]
            verdicts += check_hours(tokens, sentence, self.constraints)
            verdicts += prices + policies
            verdicts += check_capabilities(tokens, sentence, self.constraints, policy_claim=bool(policies))
        unique: dict[tuple[str, str, str | None, str], Verdict] = {}
        for v in verdicts:
            unique.setdefault((v.verdict, v.category, v.constraint_ref, v.claim), v)
        return list(unique.values())

    async def grade(self, agent_utterance: str, caller_utterance: str | None = None, *,
                    call_id: str | None = None) -> list[Verdict]:
        """One verdict per claim; action claims (named by the caller's turn if need be) go to ``call_id``'s ledger."""
        verdicts = self.check(agent_utterance, caller_utterance)
        claims = find_action_claims(agent_utterance, caller_utterance)
        return verdicts + (await self.check_actions(claims, call_id) if claims else [])

    async def check_actions(self, claims: Sequence[tuple[str, set[str]]], call_id: str | None) -> list[Verdict]:
        """Judge completion claims against the ledger of ``call_id``."""
        if self.ledger is None or call_id is None:
            why = "no operation ledger to check the claim against"
            return [Verdict("out_of_scope", claim, "action", "ledger", why, 0.5) for claim, _ in claims]
        succeeded = await self.ledger.succeeded_operations(call_id)
        return [check_action_claim(claim, keys, succeeded) for claim, keys in claims]

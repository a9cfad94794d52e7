"""Policy look-up over the bundled policy fixtures; the scope is fixed by this trusted code, never by the model."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from pipecat.adapters.llm.schemas.function_schema import FunctionSchema

from pipecat_harness.demo.retail_tools import ToolHandler
from pipecat_harness.retrieval import EvidenceRetriever, RetrievalScope, load_documents
from pipecat_harness.retrieval.labeled import DATA_DIR
from pipecat_harness.retrieval.tool import POLICY_LOOKUP_TOOL, policy_lookup_handler, policy_lookup_schema

__all__ = ["DEMO_CALL_DATE", "PolicyTools"]

#: The reference date of the bundled fixtures (the labeled set's call date).
DEMO_CALL_DATE = dt.date(2026, 11, 20)


class PolicyTools:
    """``lookup_policy`` over the bundled fixtures for one tenant."""

    def __init__(self, retriever: EvidenceRetriever, scope: RetrievalScope) -> None:
        self.retriever = retriever
        self.scope = scope

    @classmethod
    async def create(cls, *, tenant: str = "northwind", products: Sequence[str] = (),
                     call_date: dt.date = DEMO_CALL_DATE) -> PolicyTools:
        """Index the bundled fixtures (lexical, in memory) for ``tenant``."""
        retriever = await EvidenceRetriever.build(load_documents(DATA_DIR / "policies.yaml"))
        return cls(retriever, RetrievalScope(tenant, tuple(products), call_date))

    @staticmethod
    def schemas() -> list[FunctionSchema]:
        """The tool's schema."""
        return [policy_lookup_schema()]

    def handlers(self) -> dict[str, ToolHandler]:
        """The read tool."""
        return {POLICY_LOOKUP_TOOL: policy_lookup_handler(self.retriever, lambda: self.scope)}

    @staticmethod
    def argument_normalizers() -> dict[str, Any]:
        """None: a question is a question."""
        return {}

    async def close(self) -> None:
        """Release the index."""
        await self.retriever.close()

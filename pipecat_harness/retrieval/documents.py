"""Policy documents: the text evidence is drawn from, with the fields that decide who may see it and when.

Revisions of one policy share a policy key (``policy_id``, or the source less ``#<revision>``): on any day only the
latest revision in effect is eligible, so an old one nobody ended is superseded.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pipecat_harness.validation import describe_validation_error, load_mapping_file

__all__ = ["BUNDLED_POLICIES", "GENERAL_PRODUCT", "DocumentError", "PolicyDocument", "load_documents",
           "parse_documents"]

#: Product name of documents that apply to every product of their tenant.
GENERAL_PRODUCT = "general"
#: The demo tenants' policies shipped with the package (pre-turn evidence searches them unless told otherwise).
BUNDLED_POLICIES = Path(__file__).parent / "data" / "policies.yaml"
_Model = TypeVar("_Model", bound=BaseModel)


class DocumentError(ValueError):
    """A document file or record is not valid; the message names the file and field."""


class PolicyDocument(BaseModel):
    """One policy text with its access and validity fields.

    Parameters:
        doc_id: Unique id of this document (one revision of one policy).
        tenant: The business it belongs to; never shown to another tenant's callers.
        product: The product it applies to, or ``general``.
        revision: The policy revision it states (``"2026-03"``, ``"v4"``...).
        effective_from: First day it applies.
        effective_to: Last day it applies (``None``: until replaced).
        language: Language code of the text.
        source: Where the original lives (URL, file, policy number).
        title: Short heading.
        text: The policy text.
        policy_id: The policy this text is a revision of (empty: the source less a trailing ``#<revision>``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    doc_id: str = Field(min_length=1)
    tenant: str = Field(min_length=1)
    product: str = Field(min_length=1)
    revision: str = Field(min_length=1)
    effective_from: dt.date
    effective_to: dt.date | None = None
    language: str = "en"
    source: str = Field(min_length=1)
    title: str = ""
    text: str = Field(min_length=1)
    policy_id: str = ""

    @model_validator(mode="after")
    def _dates_in_order(self) -> PolicyDocument:
        if self.effective_to is not None and self.effective_to < self.effective_from:
            raise ValueError(f"effective_to {self.effective_to} is before effective_from {self.effective_from}")
        return self

    def in_effect(self, day: dt.date) -> bool:
        """Whether the document applies on ``day``."""
        return self.effective_from <= day and (self.effective_to is None or day <= self.effective_to)

    @property
    def policy_key(self) -> tuple[str, str, str, str]:
        """What revisions of one policy share: tenant, product, language and the policy id."""
        policy = self.policy_id or self.source.removesuffix(f"#{self.revision}")
        return (self.tenant, self.product, self.language, policy)

    @property
    def searchable(self) -> str:
        """Title and text, the part the searches rank."""
        return f"{self.title}\n{self.text}" if self.title else self.text


def load_documents(path: str | Path) -> list[PolicyDocument]:
    """Read documents from a YAML/JSON file holding ``documents: [...]``.

    ``DocumentError`` when the file cannot be read, a record is invalid (named with its field), or a ``doc_id`` repeats.
    """
    raw = load_mapping_file(path, what="document set", error=DocumentError)
    records = raw.get("documents")
    if not isinstance(records, list):
        raise DocumentError(f"{path}: field 'documents' must be a list of documents")
    return parse_documents(records, origin=str(path))


def parse_documents(records: Iterable[Any], *, origin: str = "documents") -> list[PolicyDocument]:
    """Validate document records (mappings); ``DocumentError`` when one is invalid or a ``doc_id`` repeats."""
    documents: dict[str, PolicyDocument] = {}
    for index, document in enumerate(validate_records(PolicyDocument, records, f"{origin}: documents")):
        if document.doc_id in documents:
            raise DocumentError(f"{origin}: documents[{index}]: doc_id {document.doc_id!r} appears twice")
        documents[document.doc_id] = document
    return list(documents.values())


def validate_records(model: type[_Model], records: Iterable[Any], where: str, **defaults: Any) -> Iterator[_Model]:
    """Each record as ``model`` (over ``defaults``); ``DocumentError`` naming ``where[index]`` when one is invalid."""
    for index, record in enumerate(records):
        try:
            yield model.model_validate({**defaults, **record} if defaults else record)
        except (ValidationError, TypeError) as exc:
            detail = describe_validation_error(exc) if isinstance(exc, ValidationError) else str(exc)
            raise DocumentError(f"{where}[{index}]: {detail}") from exc

"""Identifier formats per domain and the settings of the ending rules.

A format knows a complete identifier and a prefix of one in written form (``#W2378156``, ``mia_li_3668``); the
presets follow the identifier shapes of the τ-bench customer-service domains they are named after.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

__all__ = ["DOMAIN_WAIT_SECS", "EMAIL_FORMAT", "IDENTIFIER_CUES", "KNOWN_TLDS", "USER_ID_FORMAT", "IdentifierFormat",
           "IdentifierHoldConfig"]

DomainName = Literal["retail", "airline", "telecom"]

#: Additional wait after the stop strategy fired, per domain preset.
DOMAIN_WAIT_SECS: dict[str, float] = {"retail": 2.5, "airline": 2.5, "telecom": 1.5}

#: Top-level domains that complete an email address once they follow the last dot.
KNOWN_TLDS = frozenset("com org net edu gov mil int io co us uk ca de fr es it nl au nz in jp cn br mx ru ch se no dk "
                       "fi ie be at pl pt info biz me tv ai app dev xyz online store shop tech email mail".split())


@dataclass(frozen=True)
class IdentifierFormat:
    """One identifier shape in written form: the ``complete`` and ``prefix`` patterns it fully matches.

    ``cues`` are the words that announce it ("zip", "order"); ``needs_cue_for_prefix`` holds a prefix only when
    announced (it looks like a number); ``fixed_length``: one character short of complete is a recogniser's drop.
    """

    name: str
    complete: re.Pattern[str]
    prefix: re.Pattern[str]
    cues: frozenset[str] = frozenset()
    needs_cue_for_prefix: bool = False
    fixed_length: bool = True

    def is_complete(self, ident: str) -> bool:
        """Whether ``ident`` (upper-case written form) is a complete identifier of this format."""
        return self.complete.fullmatch(ident) is not None

    def is_prefix(self, ident: str) -> bool:
        """Whether ``ident`` is a proper prefix of an identifier of this format."""
        return not self.is_complete(ident) and self.prefix.fullmatch(ident) is not None


def _fmt(name: str, complete: str, prefix: str, cues: str, *, needs_cue: bool = False,
         fixed: bool = True) -> IdentifierFormat:
    return IdentifierFormat(name, re.compile(complete, re.ASCII), re.compile(prefix, re.ASCII),
                            frozenset(cues.split()), needs_cue, fixed)


#: Nouns that announce an identifier (a lone number after them is not a quantity).
IDENTIFIER_CUES = frozenset("number # id code zip zipcode postal postcode phone digits confirmation reservation "
                            "booking locator account tracking reference ref serial email e-mail username user sku "
                            "extension ext card member membership ticket claim case invoice policy spelled spell "
                            "spelling letters initials".split())

_TLD_ALTERNATION = "|".join(sorted(KNOWN_TLDS, key=len, reverse=True)).upper()

#: ``local@domain.tld`` once a known TLD follows the last dot; any partial address is a prefix.
EMAIL_FORMAT = _fmt("email", rf"[A-Z0-9][A-Z0-9._+\-]*@[A-Z0-9\-]+(?:\.[A-Z0-9\-]+)*\.(?:{_TLD_ALTERNATION})",
                    r"[A-Z0-9][A-Z0-9._+\-]*@[A-Z0-9.\-]*", "email e-mail mail address", fixed=False)
#: τ-bench user ids: ``first_last_1234``.
USER_ID_FORMAT = _fmt("user_id", r"[A-Z]+_[A-Z]+_[0-9]{4}", r"[A-Z]+_(?:[A-Z]+(?:_[0-9]{0,3})?)?",
                      "user username login")
_ORDER_ID = _fmt("order_id", r"#?W[0-9]{7}", r"#|#?W[0-9]{0,6}", "order")
_ZIP = _fmt("zip_code", r"[0-9]{5}", r"[0-9]{1,4}", "zip zipcode postal postcode", needs_cue=True)
_ITEM_ID = _fmt("item_id", r"[0-9]{10}", r"[0-9]{1,9}", "item product sku variant", needs_cue=True)
_RESERVATION = _fmt("reservation_code", r"(?=[A-Z0-9]*[A-Z])[A-Z0-9]{6}", r"[A-Z0-9]{1,5}",
                    "reservation confirmation booking locator record", needs_cue=True)
_PHONE = _fmt("phone_number", r"1?[0-9]{10}", r"[0-9]{1,9}", "phone cell mobile telephone line callback number",
              needs_cue=True)

_DOMAIN_FORMATS: dict[str, tuple[IdentifierFormat, ...]] = {
    "retail": (_ORDER_ID, USER_ID_FORMAT, EMAIL_FORMAT, _ZIP, _ITEM_ID),
    "airline": (_RESERVATION, USER_ID_FORMAT, EMAIL_FORMAT, _ZIP),
    "telecom": (_PHONE, USER_ID_FORMAT, EMAIL_FORMAT, _ZIP),
}

ALL_FORMATS = (_ORDER_ID, _RESERVATION, _PHONE, _ZIP, _ITEM_ID, USER_ID_FORMAT, EMAIL_FORMAT)


@dataclass(frozen=True)
class IdentifierHoldConfig:
    """Settings of :func:`~pipecat_harness.input.hold_decision` and the hold strategy.

    Parameters:
        domain: Name of the preset (``"generic"`` when built by hand).
        formats: Identifier formats tried before the generic rules.
        exempt_digit_lengths: Digit-string lengths released as complete (a zip code).
        exempt_min_digits: Digit strings at least this long are released (phone, item id).
        use_context: Use cue words, quantity detection and email structure (``False``: the length rules only).
        extra_wait_secs: Additional wait after the wrapped strategy ended the turn.
        max_hold_secs: Longest total hold for one turn.
        max_chars: Only this many trailing characters are examined (bounded work).
        expected: The identifier the caller is answering for (see :meth:`expecting`); ``None``: any.
        slot_wait_secs: The wait on a prefix of the expected identifier, when longer than ``extra_wait_secs``
            (callers pause up to 2 s between groups of the identifier the agent asked for).
    """

    domain: str = "generic"
    formats: tuple[IdentifierFormat, ...] = ()
    exempt_digit_lengths: frozenset[int] = frozenset({5})
    exempt_min_digits: int = 10
    use_context: bool = True
    extra_wait_secs: float = 2.5
    max_hold_secs: float = 6.0
    max_chars: int = 400
    expected: IdentifierFormat | None = None
    slot_wait_secs: float = 2.5

    def __post_init__(self) -> None:
        object.__setattr__(self, "exempt_digit_lengths", frozenset(self.exempt_digit_lengths))
        if self.extra_wait_secs < 0 or self.max_hold_secs < 0:
            raise ValueError("extra_wait_secs and max_hold_secs must not be negative")
        if self.max_chars < 16:
            raise ValueError("max_chars must be at least 16")
        if self.exempt_min_digits < 1:
            raise ValueError("exempt_min_digits must be at least 1")

    @classmethod
    def for_domain(cls, domain: DomainName | str, **overrides: object) -> IdentifierHoldConfig:
        """Return the preset for a τ-bench domain (``retail``, ``airline``, ``telecom``; else ``ValueError``)."""
        if domain not in _DOMAIN_FORMATS:
            raise ValueError(f"unknown domain {domain!r}; choose one of {sorted(_DOMAIN_FORMATS)}")
        config = cls(domain=domain, formats=_DOMAIN_FORMATS[domain], extra_wait_secs=DOMAIN_WAIT_SECS[domain])
        return replace(config, **overrides)  # type: ignore[arg-type]

    @classmethod
    def length_rules_only(cls, **overrides: object) -> IdentifierHoldConfig:
        """Return the plain length rules: no formats, no cue words, no quantity detection."""
        return replace(cls(domain="length_rules", use_context=False), **overrides)  # type: ignore[arg-type]

    @property
    def longest_wait_secs(self) -> float:
        """The longest wait of one hold round (what the turn watchdog must leave room for)."""
        return max(self.extra_wait_secs, self.slot_wait_secs)

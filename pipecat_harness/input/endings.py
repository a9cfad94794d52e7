"""Ending rules: does a transcript end in an open identifier?

:func:`hold_decision` converts the trailing identifier run to written form and decides, in order: an open "as in"
or a trailing connector holds; an announced format releases a complete identifier and holds a prefix; another
domain format it completes releases, a distinctive prefix holds; then the generic length, quantity and single
letter rules. ``use_context=False`` keeps only the connector and length rules (the benchmark's baseline).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from pipecat_harness.input.identifier_formats import IDENTIFIER_CUES, KNOWN_TLDS, IdentifierFormat, IdentifierHoldConfig
from pipecat_harness.input.slots import slot_decision
from pipecat_harness.input.spoken_tokens import FILLER_WORDS, Piece, tokenize

__all__ = ["IDENTIFIER_CUES", "HoldDecision", "continues_identifier", "hold_decision"]

_COPULAS = frozenset({"is", "was", "it's", "that's", "are", "'s"})
_MAIL_PROVIDERS = frozenset({"gmail", "yahoo", "outlook", "hotmail", "icloud", "aol", "proton", "protonmail", "live"})
_ID_KINDS = frozenset({"digit", "letter", "connector", "written", "multiplier"})
_CUE_WINDOW = 6
#: Words after which a final "at" is ordinary speech cut short, not an email ("I'm at", "look at").
_ORDINARY_BEFORE_AT = frozenset(
    "i'm im we're you're they're he's she's it's am is are was were be been being me you him her us them it "
    "that this what where here there home look looks looked looking stay stays stayed staying live lives lived "
    "living work works worked working arrive arrives arrived arriving meet meeting met stop stopped aim aimed "
    "point pointed pointing laugh laughing stare staring start started starting end ended open opened close "
    "closed bought buy purchased shop shopped order ordered delivered left sold price priced available good "
    "bad great better best worse worst not just right back up down out off over in on of to and or but so then "
    "now still also only even all least most first last once twice noon night midnight one".split()
)
_GROUPED_DIGITS = re.compile(r"[0-9]+(?:[-.][0-9]+)+[-.]?", re.ASCII)
_GROUP_SEPARATOR = re.compile(r"(?<=[0-9])[-.](?=[0-9])", re.ASCII)
_JOINERS = frozenset({".", "_", "@"})
_EMAIL_ANNOUNCED = re.compile(r"\be-?mail(?: address)?(?: is|'s| was)\s+(?P<tail>[^?!]*)$", re.IGNORECASE)
_PROVIDER_ENDING = re.compile(r"(?:GMAIL|YAHOO|OUTLOOK|HOTMAIL|ICLOUD|AOL|PROTONMAIL|PROTON)\.(?:COM|NET|ORG|ME|CO)$",
                              re.ASCII)


@dataclass(frozen=True)
class HoldDecision:
    """Whether to hold a user turn (``hold``), why (``reason``), the ``rule`` that decided and the ``identifier``."""

    hold: bool
    reason: str
    rule: str
    identifier: str = ""

    def to_dict(self) -> dict[str, object]:
        """Return the decision as a JSON-serialisable mapping."""
        return asdict(self)


_DEFAULT_CONFIG = IdentifierHoldConfig()


def hold_decision(text: str, config: IdentifierHoldConfig | None = None) -> HoldDecision:
    """Decide whether the user turn's text so far ends in an open identifier (its tail only; ``TypeError``: no str)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    config = config or _DEFAULT_CONFIG
    if config.expected is not None and config.use_context:
        slot = slot_decision(text[-config.max_chars :], config.expected)
        if slot is not None:
            return HoldDecision(*slot)
    pieces = tokenize(text, max_chars=config.max_chars)
    trailing_filler = False
    while pieces and pieces[-1].kind == "word" and pieces[-1].text in FILLER_WORDS:
        pieces.pop()
        trailing_filler = True
    if not pieces:
        return HoldDecision(False, "nothing transcribed", "empty")

    if config.use_context and _open_as_in(pieces):
        return HoldDecision(True, "ends in an open 'as in' spelling", "as_in_open")

    start, run, spelled = _run_start(pieces, config)
    window = {p.text for p in pieces[max(0, start - _CUE_WINDOW) : start] if p.kind == "word"}
    if not run:
        if config.use_context and _cue_open([p.text for p in pieces]):
            return HoldDecision(True, "an identifier was announced but not yet said", "cue_open")
        if config.use_context and _email_without_domain(text):
            return HoldDecision(True, "an announced email has no domain yet", "email_open")
        return HoldDecision(False, "ends in ordinary words", "ordinary")

    ident = _ungroup_digits(_written(run))
    provider = _PROVIDER_ENDING.search(ident)
    if config.use_context and provider and (provider.start() > 0 or _EMAIL_ANNOUNCED.search(text[-200:])):
        # The recogniser dropped the "at" ("omar.patel gmail.com"): the address is all there.
        return HoldDecision(False, "complete email (its 'at' not transcribed)", "complete:email", ident)
    last = run[-1]
    if last.kind == "multiplier":
        return HoldDecision(True, "ends in 'double'/'triple'", "trailing_multiplier", ident)
    if last.kind in ("connector", "at") or (last.kind == "written" and not ident[-1].isalnum()):
        return HoldDecision(True, f"ends in the connector {last.word!r}", "trailing_connector", ident)

    if config.use_context:
        # A recogniser that wrote the run as one formatted token ("684-967-898", "XZ4Y6") heard it whole.
        formatted = last.kind == "written" and len(run) == 1 and not (trailing_filler or last.pause_after)
        decided = _format_decision(ident, window, config, formatted=formatted)
        if decided is not None:
            return decided
    # A number followed by "uh" or a comma is a list still being read, not a quantity.
    mid_list = trailing_filler or last.pause_after
    return _generic_decision(run, ident, window, config, spelled=spelled, mid_list=mid_list)


def continues_identifier(text: str, config: IdentifierHoldConfig | None = None) -> bool:
    """Whether a turn opens (after fillers and "and"/"then") with the rest of an identifier begun last turn."""
    config = config or _DEFAULT_CONFIG
    pieces = tokenize(text[: config.max_chars])
    skip = FILLER_WORDS | {"and", "then", "so", "yes", "yeah", "sorry", "okay", "ok"}
    first = next((p for p in pieces if not (p.kind == "word" and p.text in skip)), None)
    return first is not None and first.kind in _ID_KINDS


def _email_without_domain(text: str) -> bool:
    """Whether an announced email ("my email is ...") has begun with no domain yet (recognisers keep the dots)."""
    match = _EMAIL_ANNOUNCED.search(text[-200:])
    if match is None:
        return False
    tail = match.group("tail").strip().lower()
    if not tail or len(tail.split()) > 8 or "@" in tail or re.search(r"\bat\b", tail):
        return False
    return bool(re.search(r"\bdot\b|\w\.\w", tail))


def _open_as_in(pieces: list[Piece]) -> bool:
    words = [p.text for p in pieces[-3:]]
    if words[-2:] == ["as", "in"] and len(pieces) >= 3:
        return pieces[-3].kind in ("letter", "word") and len(pieces[-3].word) == 1
    if words[-1:] == ["as"] and len(pieces) >= 2:
        return pieces[-2].kind == "letter"
    return False


def _cue_open(words: list[str]) -> bool:
    """Whether an identifier was announced and not yet said ("my order number is", "the zip code's")."""
    last = words[-1]
    return (last.endswith("'s") and last[:-2] in IDENTIFIER_CUES) or (
        last in _COPULAS and any(w in IDENTIFIER_CUES for w in words[-5:-1]))


def _email_context(pieces: list[Piece], at_index: int) -> bool:
    before = pieces[at_index - 1] if at_index > 0 else None
    after = pieces[at_index + 1] if at_index + 1 < len(pieces) else None
    if before is None or before.kind not in ("word", "letter", "digit", "written"):
        return False
    return ((after is not None and after.text in _MAIL_PROVIDERS)
            or (at_index + 3 < len(pieces) and pieces[at_index + 2].text == "."
                and pieces[at_index + 3].text in KNOWN_TLDS)
            or (at_index >= 2 and pieces[at_index - 2].kind in ("connector", "digit", "letter"))
            or before.kind in ("digit", "written")
            # A turn ending "<name> at" is an address cut off before its domain.
            or (after is None and before.kind == "word" and before.text not in _ORDINARY_BEFORE_AT)
            or any(p.text in ("email", "e-mail", "mail") for p in pieces[max(0, at_index - 8) : at_index]))


def _run_start(pieces: list[Piece], config: IdentifierHoldConfig) -> tuple[int, list[Piece], bool]:
    """Where the trailing identifier run starts, its pieces (no "as in" examples), and whether it is spelled."""
    index = len(pieces) - 1
    run: list[Piece] = []
    spelled = False
    while index >= 0:
        piece = pieces[index]
        # "Y as in yellow" / "V as in victor": the example word and "as in" belong to the letter.
        as_in = index >= 3 and [p.text for p in pieces[index - 2 : index]] == ["as", "in"]
        if config.use_context and as_in and (len(pieces[index - 3].word) == 1 or pieces[index - 3].kind == "letter"):
            spelled = True
            index -= 3
            continue
        if not _in_run(pieces, index, config):
            break
        spelled = spelled or (piece.kind == "letter" and len(piece.word) > 1)
        run.append(piece)
        index -= 1
    run.reverse()
    return index + 1, run, spelled


def _in_run(pieces: list[Piece], index: int, config: IdentifierHoldConfig) -> bool:
    piece = pieces[index]
    if piece.kind in _ID_KINDS:
        return not (piece.weak and index == len(pieces) - 1 and config.use_context and not _weak_counts(pieces, index))
    if piece.kind == "at":
        return not config.use_context or _email_context(pieces, index)
    if piece.kind != "word" or not config.use_context or not (piece.text.isalnum() and piece.text.isascii()):
        return False
    # Email and user-id parts: ordinary words joined by "dot", "underscore" or "at".
    after = pieces[index + 1] if index + 1 < len(pieces) else None
    before = pieces[index - 1] if index > 0 else None
    joined_after = after is not None and after.text in _JOINERS and not after.weak
    joined_before = before is not None and before.text in _JOINERS and not before.weak
    if joined_before and pieces[index - 1].kind == "at" and not _email_context(pieces, index - 1):
        return False
    return joined_after or joined_before


def _weak_counts(pieces: list[Piece], index: int) -> bool:
    """A weak connector ("point", "pound") ends an identifier only after identifier pieces or a cue."""
    return (index > 0 and pieces[index - 1].kind in ("digit", "letter", "written")) or any(
        p.text in IDENTIFIER_CUES for p in pieces[max(0, index - 4) : index])


def _ungroup_digits(ident: str) -> str:
    """Drop the separators ASR formatting puts between digit groups ("415-555-0134" is ten digits)."""
    return _GROUP_SEPARATOR.sub("", ident) if _GROUPED_DIGITS.fullmatch(ident) else ident


def _written(run: list[Piece]) -> str:
    out: list[str] = []
    repeat = 1
    for piece in run:
        if piece.kind == "multiplier":
            repeat = int(piece.text)
            continue
        text = piece.text.upper() if piece.kind in ("word", "letter", "written") else piece.text
        out.append(text * repeat if len(text) == 1 else text)
        repeat = 1
    return "".join(out)


def _format_decision(ident: str, window: set[str], config: IdentifierHoldConfig, *,
                     formatted: bool = False) -> HoldDecision | None:
    announced = [f for f in config.formats if f.cues & window]
    if fmt := next((f for f in announced if f.is_complete(ident)), None):
        return HoldDecision(False, f"complete {fmt.name} (announced)", f"complete:{fmt.name}", ident)
    if fmt := next((f for f in announced if f.is_prefix(ident)), None):
        return _prefix_decision(fmt, ident, f"prefix of an announced {fmt.name}", formatted=formatted)
    if fmt := next((f for f in config.formats if f.is_complete(ident)), None):
        return HoldDecision(False, f"complete {fmt.name}", f"complete:{fmt.name}", ident)
    if fmt := next((f for f in config.formats if not f.needs_cue_for_prefix and f.is_prefix(ident)), None):
        return _prefix_decision(fmt, ident, f"prefix of a {fmt.name}", formatted=formatted)
    return None


#: One more character of each kind: a prefix that any of them completes is one character short.
_ONE_MORE = ("0", "A")


def _prefix_decision(fmt: IdentifierFormat, ident: str, reason: str, *, formatted: bool) -> HoldDecision:
    """Hold a prefix, unless the recogniser wrote it as one token one character short of complete.

    A recogniser writes what it heard in one breath as one token (``684-967-898``) and drops one of a repeated
    character; callers pause between groups, not before the last character, so holding it only delays the turn.
    """
    if formatted and fmt.fixed_length and any(fmt.is_complete(ident + extra) for extra in _ONE_MORE):
        why = f"one character short of a complete {fmt.name}, written as one token: the recogniser dropped a repeat"
        return HoldDecision(False, why, f"one_short:{fmt.name}", ident)
    return HoldDecision(True, reason, f"prefix:{fmt.name}", ident)


def _generic_decision(run: list[Piece], ident: str, window: set[str], config: IdentifierHoldConfig, *, spelled: bool,
                      mid_list: bool) -> HoldDecision:
    digits = sum(c.isdigit() for c in ident)
    letters = sum(c.isalpha() for c in ident)
    if digits and digits == len(ident):
        if digits in config.exempt_digit_lengths or digits >= config.exempt_min_digits:
            return HoldDecision(False, f"{digits} digits: complete as said", "exempt_length", ident)
        if config.use_context and len(run) == 1 and not mid_list and not (window & IDENTIFIER_CUES):
            if run[0].as_number or run[0].kind == "digit":
                return HoldDecision(False, "a number said as a quantity", "quantity", ident)
        return HoldDecision(True, f"open digit run ({digits} digits)", "digit_run", ident)
    if config.use_context and letters == 1 and len(ident) == 1 and not spelled and not (window & IDENTIFIER_CUES):
        return HoldDecision(False, "a single letter used as a word", "single_letter", ident)
    if letters and not digits and all(p.kind == "letter" for p in run):
        return HoldDecision(True, f"open spelled run ({letters} letters)", "spelled_letters", ident)
    return HoldDecision(True, "open identifier", "open_identifier", ident)

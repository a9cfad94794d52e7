"""Ground truth for history fidelity: what was generated, heard and retained per assistant turn."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from pipecat_harness.sim.model_reading import message_text
from pipecat_harness.sim.sim_tts import SpeechLedger

__all__ = ["TurnPlayback", "measure_playback", "normalize_words"]


def normalize_words(text: str) -> list[str]:
    """Lower-case words with punctuation stripped (for comparing texts word by word)."""
    return [w for w in (re.sub(r"[^\w']", "", t).lower() for t in text.split()) if w]


@dataclass(frozen=True)
class TurnPlayback:
    """One assistant turn scored against ground truth.

    Parameters:
        context_id: The TTS context of the turn.
        generated_words: Words synthesized for the turn.
        heard_words: Words the caller heard (at least half played).
        retained_words: Words of the generated text still in history (common prefix).
        unplayed_retained: Retained words beyond what was heard.
        played_removed: Heard words missing from history.
        interrupted: Whether playback stopped before the end because the caller barged in.
        retained_text: The history message matched to this turn.
        call_ended: Playback was still going when the call hit its limit (not a barge-in; its history is not scored).
    """

    context_id: str
    generated_words: int
    heard_words: int
    retained_words: int
    unplayed_retained: int
    played_removed: int
    interrupted: bool
    retained_text: str
    call_ended: bool = False

    def to_dict(self) -> dict[str, Any]:
        """As a JSON-serialisable mapping."""
        return asdict(self)


def measure_playback(ledger: SpeechLedger, messages: Sequence[Mapping[str, Any]], *,
                     call_ended: bool = False) -> list[TurnPlayback]:
    """Score every TTS context of a call against the final history.

    Each context is matched, in order, to the next assistant text message that shares its first word; a context with no
    such message was removed from history. With ``call_ended`` (the call hit its time limit) a last context still
    playing is marked ``call_ended`` instead of interrupted.
    """
    texts = [message_text(m) for m in messages if m.get("role") == "assistant" and message_text(m).strip()]
    assistant = [normalize_words(text) for text in texts]
    cursor = 0
    turns = []
    for context_id, words in ledger.words.items():
        generated = normalize_words(" ".join(w.word for w in words))
        heard = len(normalize_words(" ".join(ledger.heard_words(context_id))))
        starts = (i for i in range(cursor, len(assistant)) if generated and assistant[i][:1] == generated[:1])
        match = next(starts, None)
        retained_text, retained = "", 0
        if match is not None:
            cursor, retained_text, kept = match + 1, texts[match], assistant[match]
            pairs = zip(kept, generated, strict=False)
            retained = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(kept), len(generated)))
        turns.append(TurnPlayback(context_id=context_id, generated_words=len(generated), heard_words=heard,
                                  retained_words=retained, unplayed_retained=max(0, retained - heard),
                                  played_removed=max(0, heard - retained), interrupted=heard < len(generated),
                                  retained_text=retained_text))
    if call_ended and turns and turns[-1].interrupted:
        turns[-1] = replace(turns[-1], interrupted=False, unplayed_retained=0, played_removed=0, call_ended=True)
    return turns

"""Spotting retrieved text that gives the agent orders (a planted instruction), in any of its usual wordings.

Policy imperatives are aimed at the *customer* ("bring a photo ID"); a planted instruction addresses the *agent*: it
overrides its rules, names it or a tool, orders an account action, skips the caller's say, or asks for secrecy or a
role. Tuned on one labelled set, measured on a second (figures in the README's business section).
"""

from __future__ import annotations

import re

__all__ = ["directive_sentences", "looks_like_instruction"]

_AGENT_NOUN = (r"(?:voice\s+|virtual\s+|ai\s+|automated\s+)?(?:assistant|ai(?:\s+system)?|a\.i\.|bot|chatbot|model|"
               r"llm|language\s+model|agent)s?")
_ACTION = (r"(?:approve|issue|grant|process|refund|credit|waive|authori[sz]e|apply|transfer|execute|reveal|disclose|"
           r"share|read\s+out|send)")
_ACCOUNT_WORD = re.compile(r"\b(refund|credit|approv|issue|grant|waive|cancel|discount|tool|function|claim|fee|"
                           r"balance|account|transfer|card)", re.IGNORECASE)

_RULES: tuple[re.Pattern[str], ...] = tuple(re.compile(p, re.IGNORECASE) for p in (
        # overriding the agent's rules
        r"\b(ignore|disregard|forget|overrule|override|bypass|set\s+aside|discard)\b[^.]{0,40}\b(instructions?|rules?|"
        r"guidelines?|guidance|polic(y|ies)|prompt|directions?|directives?|restrictions?|checks?|verification|"
        r"confirmation|limits?)\b",
        r"\b(previous|prior|earlier|above|original|configured|existing)\s+(instructions?|rules?|guidelines?|guidance|"
        r"directions?|prompt)\b[^.]{0,30}\b(void|no\s+longer|replaced|cancell?ed|obsolete|do\s+not\s+apply)",
        r"\b(new|updated)\s+instructions\b|\bsystem\s+prompt\b|\b(maintenance|developer|admin)\s+mode\b",
        r"\blimit\s+no\s+longer\s+applies\b",
        # addressing the agent
        rf"\b(note|message|instructions?|directive|reminder|attention|polic(y|ies)(\s+update)?)\b[^.:]{{0,20}}"
        rf"\b(to|for)\s+(the\s+|all\s+|any\s+)?{_AGENT_NOUN}\b",
        rf"^\W*(hey\s+|dear\s+|attention\s+|please,?\s+|important\s+instruction\s+for\s+the\s+)?(the\s+)?{_AGENT_NOUN}"
        rf"\s*(,|:|-|\s-\s|directive)",
        r"^\W*\[?(system|admin|assistant|developer)\]?\s*[:\]]",
        r"\bif\s+you\s+are\s+an?\s+(ai|assistant|language\s+model|bot|llm|automated)",
        rf"\b{_AGENT_NOUN}\b[^.]{{0,30}}\b(reading|handling|answering)\s+(this|the\s+call|calls)\b",
        r"\b(to\s+)?(whoever|anyone)\s+(is\s+)?reading\s+this\b|\bwhen\s+you\s+read\s+this\b",
        r"\bhidden\s+note\b",
        # naming a tool to run
        r"\b(call|invoke|run|use|execute|trigger|fire)\s+(the\s+)?([a-z]+_[a-z_]+|[a-z]+\s+(tool|function)|"
        r"(tool|function))\b",
        r"\b[a-z]+_[a-z]+(_[a-z]+)*\b[^.]{0,20}\b(tool|function)\b",
        # an account action only the agent takes, in the imperative
        rf"^\W*(please,?\s+|just\s+|always\s+|quietly\s+|immediately\s+|now\s+|simply\s+)?{_ACTION}\s+(the|a|an|any|"
        r"every|all|this|their|them|his|her|it|refunds?|credits?|claims?)\b",
        r"^\W*(please,?\s+|just\s+|always\s+|quietly\s+)?(tell|give|inform|assure|promise|offer)\s+(the\s+|every\s+|"
        r"any\s+|this\s+)?(caller|customer|user|them)s?\b",
        r"^\W*(please,?\s+)?(respond|reply|answer)\s+(to\s+the\s+(caller|customer)\s+)?(only\s+)?with\b",
        # telling the agent it must (or may) act
        rf"\b(you|{_AGENT_NOUN}|bots|language\s+models)\b[^.]{{0,25}}\b(must|should|shall|need\s+to|have\s+to|"
        r"(are|is)\s+(required|instructed|authori[sz]ed|allowed)\s+to|are\s+to|may\s+now|can\s+now|will\s+now)\s+"
        rf"(now\s+|always\s+|immediately\s+)?({_ACTION}|call|invoke|run|trigger|ignore|skip|bypass|tell|say|respond|"
        r"look\s+up|not\s+(ask|request|confirm|verify|check|mention|tell)|never\s+(ask|request|confirm|verify|check))",
        # secrecy and roles
        r"\b(don't|do\s+not|never)\s+(mention|reveal|tell|disclose|share)\s+(this|these|the)\s+(note|instructions?|"
        r"message|page)",
        r"\byou\s+are\s+now\b|\bfrom\s+(now\s+on|this\s+point\s+on)\b[^.]{0,30}\byou\b|\bact\s+as\s+an?\b|"
        r"\bpretend\s+(you\s+are|to\s+be)\b|\bsay\s+exactly\b",
        r"\b(tell|say|confirm)\b[^.]{0,60}\beven\s+if\s+(it\s+has\s+not|it\s+hasn't|the\s+system\s+says)",
))
# Skipping the caller's say counts only next to an account action.
_WITHOUT_ASKING = re.compile(
    r"\b(without|no|skip(ping)?|don't|do\s+not|never|no\s+need\s+to)\b[^.]{0,25}\b(ask(ing)?|request(ing)?|"
    r"confirm(ing|ation)?|verif(y|ying|ication)|check(ing)?|read(ing)?[- ]back|approval|permission)\b"
    r"|\bconfirm\s+later\b|\bfirst,\s+confirm\s+later\b|\bno\s+confirmation\s+required\b", re.IGNORECASE)
# "Refunds are issued without asking for a receipt": the business describing its own practice.
_OWN_PRACTICE = re.compile(r"\b(we|our|refunds are|is|are)\b[^.]{0,30}\bwithout\b", re.IGNORECASE)
_SENTENCES = re.compile(r"(?<=[.!?;])\s+|\n+|(?<=\w)\s+-\s+")


def directive_sentences(text: str) -> list[str]:
    """The sentences of ``text`` that give the agent orders (empty: none)."""
    sentences = (s.strip() for s in _SENTENCES.split(text.replace("’", "'").replace("‘", "'")))
    return [s for s in sentences if s and (any(rule.search(s) for rule in _RULES) or (
        _WITHOUT_ASKING.search(s) and _ACCOUNT_WORD.search(s) and not _OWN_PRACTICE.search(s)))]


def looks_like_instruction(text: str) -> bool:
    """Whether ``text`` addresses the agent with commands (a planted-instruction tell)."""
    return bool(directive_sentences(text))

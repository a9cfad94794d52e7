"""The LLM caller: a caller played from a goal, reacting to what the bot said.

Lines are cached per (seed, scenario, run, turn, conversation so far), so both arms of a comparison that reach the same
point hear the same caller, even from a model that ignores its seed. A line ending in ``[hang up]`` is the last.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipecat.frames.frames import TTSTextFrame
from pipecat.observers.base_observer import FramePushed
from pipecat.processors.frame_processor import FrameDirection

from pipecat_harness.fakes.openai_chat import OpenAIChatFake
from pipecat_harness.sim.audio.cache import write_atomically
from pipecat_harness.sim.caller import _EPSILON, SimulatedCaller
from pipecat_harness.sim.caller_goal import CallerGoal, spoken_segments
from pipecat_harness.sim.goal_brain import HANG_UP, GoalBrain
from pipecat_harness.sim.model_arm import ModelArm
from pipecat_harness.sim.scenario import CallerSpec, CallerTurn, SpeechSegment

__all__ = ["CallerLines", "GoalCaller", "GoalCallerSettings"]

_OFFLINE_MODEL = "goal-brain"


@dataclass(frozen=True)
class GoalCallerSettings:
    """How goal callers are played in a run.

    Parameters:
        model: The caller model (``None``: the deterministic brain on the loopback fake).
        seed: Sampling seed of the caller model.
        run: The run (timing variant) the call belongs to.
        cache_dir: Where caller lines are cached across calls and processes (``None``: not cached).
    """

    model: ModelArm | None = None
    seed: int = 0
    run: int = 0
    cache_dir: str | None = None


class CallerLines:
    """The caller model's next lines (``model_name`` at ``base_url``), cached by the turn's context."""

    def __init__(self, goal: CallerGoal, scenario: str, settings: GoalCallerSettings, *, base_url: str | None,
                 api_key: str, model_name: str) -> None:
        from openai import OpenAI

        self._goal = goal
        self._settings = settings
        self._key_parts = [settings.model.label if settings.model else _OFFLINE_MODEL, settings.seed, scenario,
                           settings.run]
        self._model_name = model_name
        # A blocking client run in an executor thread: the loop freezes virtual time until the line is back, while the
        # client's own timeouts and retry back-off run on real time.
        self._client = OpenAI(api_key=api_key, base_url=base_url, max_retries=2, timeout=60.0)
        self.requests = 0

    async def next_line(self, turn: int, conversation: list[dict[str, str]]) -> str:
        """The caller's line for ``turn`` after ``conversation`` (bot lines ``user``, the caller's ``assistant``)."""
        raw = json.dumps([*self._key_parts, turn, self._goal.model_dump(), conversation], sort_keys=True)
        key = hashlib.sha256(raw.encode()).hexdigest()
        path = Path(self._settings.cache_dir) / f"{key}.json" if self._settings.cache_dir else None
        if path is not None and path.exists():
            return str(json.loads(path.read_text(encoding="utf-8"))["line"])
        line = await asyncio.get_running_loop().run_in_executor(None, self._ask, conversation)
        if path is not None:
            write_atomically(path, json.dumps({"line": line, "conversation": conversation}).encode("utf-8"))
        return line

    def _ask(self, conversation: list[dict[str, str]]) -> str:
        self.requests += 1
        messages: list[Any] = [{"role": "system", "content": self._goal.instructions()}, *conversation]
        if not conversation:
            messages.append({"role": "user", "content": "(The call has connected; say your first line.)"})
        response = self._client.chat.completions.create(model=self._model_name, messages=messages, temperature=0.0,
                                                        seed=self._settings.seed, max_tokens=120)
        return (response.choices[0].message.content or "").strip()

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()


class GoalCaller(SimulatedCaller):
    """Plays a :class:`CallerGoal` into a running ``PipelineWorker``, line by line from a caller model.

    Create with :meth:`start` (it starts the offline caller model when no model is given); :meth:`stop` after.
    ``fake`` is the loopback caller model to stop, ``kwargs`` go to :class:`SimulatedCaller`.
    """

    def __init__(self, goal: CallerGoal, lines: CallerLines, voice: CallerSpec, *, fake: OpenAIChatFake | None = None,
                 **kwargs: Any) -> None:
        super().__init__([], voice, **kwargs)
        self._goal = goal
        self._lines = lines
        self._fake = fake
        self._heard: list[str] = []
        self.conversation: list[dict[str, str]] = []

    @classmethod
    async def start(cls, goal: CallerGoal, scenario: str, voice: CallerSpec, settings: GoalCallerSettings,
                    **kwargs: Any) -> GoalCaller:
        """Build the caller and its caller model (the loopback brain offline)."""
        fake = None
        base_url: str | None
        if settings.model is None:
            fake = await OpenAIChatFake(GoalBrain(goal), server="openai").start()
            base_url, key, name = fake.base_url, "loopback", _OFFLINE_MODEL
        else:
            (base_url, key), name = settings.model.chat_endpoint(), settings.model.name
        lines = CallerLines(goal, scenario, settings, base_url=base_url, api_key=key, model_name=name)
        return cls(goal, lines, voice, fake=fake, **kwargs)

    async def stop(self) -> None:
        """Close the caller model's client and stop the loopback fake."""
        self._lines.close()
        if self._fake is not None:
            await self._fake.stop()

    @property
    def requests(self) -> int:
        """Requests made to the caller model (cache hits excluded)."""
        return self._lines.requests

    async def on_push_frame(self, data: FramePushed) -> None:
        """Track the bot's speaking state and the words it spoke."""
        await super().on_push_frame(data)
        if data.direction == FrameDirection.DOWNSTREAM and isinstance(data.frame, TTSTextFrame):
            self._heard.append(data.frame.text)

    async def run(self, worker: Any, *, linger_secs: float = 1.0, final_wait_secs: float = 12.0) -> None:
        """Answer the bot line by line until the caller hangs up, gives up or runs out of turns."""
        self._call_start = asyncio.get_running_loop().time()
        for turn in range(self._goal.max_turns):
            if not await self._wait_for_reply(self._bot.starts):
                self._give_up(turn)
                break
            heard = " ".join(" ".join(self._heard).split())
            self._heard.clear()
            if heard:
                self.conversation.append({"role": "user", "content": heard})
            line = await self._lines.next_line(turn, list(self.conversation))
            spoken = HANG_UP.sub(" ", line).strip()
            self.conversation.append({"role": "assistant", "content": spoken})
            self._note("caller_turn", turn, said=spoken)
            segments = [SpeechSegment.model_validate(s) for s in spoken_segments(spoken, self._goal.pause_secs)]
            await self._speak(worker, CallerTurn(after="bot", delay=0, speech=segments))
            if HANG_UP.search(line):
                self.completed = True
                await self._linger(linger_secs, final_wait_secs)
                break
        else:
            self._give_up(self._goal.max_turns)
        await self._end_call(worker)

    async def _wait_for_reply(self, since: int) -> bool:
        """Wait for the bot to reply and go quiet, or cut in when the reply runs past ``interrupts.after_secs``."""
        if not await self._bot_started(since, self._goal.wait_secs):
            return False
        loop = asyncio.get_running_loop()
        cut_after = self._goal.interrupts.after_secs
        if cut_after is not None:
            cut_at = self._bot.last_start + cut_after
            while self._bot.speaking and loop.time() < cut_at - _EPSILON:
                await self._changed(cut_at - loop.time())
            if self._bot.speaking:
                return True
        return await self._bot_quiet_for(self._goal.reply_delay_secs)

from pipecat.frames.frames import (
    InterruptionFrame,
    OutputTransportMessageUrgentFrame,
    TTSTextFrame,
)
from pipecat.tests.utils import run_test

from pipecat_harness.history import PlaybackTracker, ReplyPlayback, SpokenSegment, twilio_mark_message
from pipecat_harness.history.marks import format_mark, parse_mark, twilio_mark_name
from tests.history.history_frames import announce, audio, reply_end, reply_start, sentence, settle

FIRST = "All set, I have refunded forty five dollars to your card."
SECOND = "You will see it on your statement within five to seven business days."


async def test_uninterrupted_reply_is_finished_with_all_audio_counted() -> None:
    tracker = PlaybackTracker()
    frames = [*reply_start("c1"), *sentence(FIRST, "c1", 2.0), *sentence(SECOND, "c1", 1.6), *reply_end("c1")]
    await run_test(tracker, frames_to_send=frames)
    reply = tracker.last
    assert reply is not None
    assert reply.state == "finished"
    assert reply.context_id == "c1"
    assert abs(reply.written_secs - 3.6) < 1e-6
    assert [s.played_through for s in reply.segments] == [True, True]
    assert reply.spoken_text == f"{FIRST} {SECOND}"


async def test_interruption_freezes_the_reply_mid_sentence() -> None:
    tracker = PlaybackTracker()
    frames = [*reply_start("c1"), *sentence(FIRST, "c1", 2.0), *sentence(SECOND, "c1", 4.0, played=1.2),
              settle(), InterruptionFrame(), *audio(0.4)]
    await run_test(tracker, frames_to_send=frames)
    reply = tracker.last
    assert reply is not None
    assert reply.state == "interrupted"
    assert abs(reply.written_secs - 3.2) < 1e-6  # audio after the interruption is not the reply's
    assert abs(reply.segments[1].start_secs - 2.0) < 1e-6
    heard = tracker.heard_prefix(reply)
    assert heard.reliable
    assert heard.text.startswith(FIRST + " You will")
    assert len(heard.text.split()) < len((FIRST + " " + SECOND).split())


async def test_word_level_text_gives_word_times() -> None:
    tracker = PlaybackTracker()
    words = FIRST.split()
    frames = [*reply_start("c1"), announce(FIRST, "c1")]
    for i, word in enumerate(words[:4]):
        frame = TTSTextFrame(text=word, text_type="word", context_id="c1")
        frame.pts = 1_000_000_000 + i * 300_000_000
        frames.extend([frame, *audio(0.28)])
    frames.extend([settle(), InterruptionFrame()])
    await run_test(tracker, frames_to_send=frames)
    reply = tracker.last
    assert reply is not None
    assert [w for w, _ in reply.word_times] == words[:4]
    assert [round(t, 2) for _, t in reply.word_times] == [0.0, 0.3, 0.6, 0.9]
    heard = tracker.heard_prefix(reply)
    assert heard.method == "word_timestamps"
    assert heard.units_heard <= 4


async def test_interruption_before_any_audio_has_no_reliable_prefix() -> None:
    tracker = PlaybackTracker()
    frames = [*reply_start("c1"), announce(FIRST, "c1"),
              settle(), InterruptionFrame()]
    await run_test(tracker, frames_to_send=frames)
    reply = tracker.last
    assert reply is not None and reply.state == "interrupted"
    heard = tracker.heard_prefix(reply)
    assert not heard.reliable
    assert heard.reason == "no audio played"


async def test_marks_are_sent_upstream_and_receipts_replace_the_written_count() -> None:
    tracker = PlaybackTracker()
    tracker.enable_marks(lambda name: twilio_mark_message("MZ1", name), interval_secs=0.5)
    frames = [*reply_start("c1"), *sentence(FIRST, "c1", 3.0, played=1.2)]
    _, up = await run_test(tracker, frames_to_send=frames)
    marks = [f for f in up if isinstance(f, OutputTransportMessageUrgentFrame)]
    assert len(marks) == 2
    names = [twilio_mark_name(m.message) for m in marks]
    assert all(n is not None for n in names)
    reply = tracker.last
    assert reply is not None and reply.marks_sent
    assert reply.played_secs == 0.0  # nothing confirmed yet
    assert tracker.on_mark_received(str(names[0]))
    assert abs(reply.played_secs - 0.52) < 1e-6


async def test_marks_echoed_after_the_interruption_are_not_receipts() -> None:
    tracker = PlaybackTracker()
    tracker.enable_marks(lambda name: {"name": name}, interval_secs=0.2)
    frames = [*reply_start("c1"), *sentence(FIRST, "c1", 3.0, played=1.0), settle(), InterruptionFrame()]
    _, up = await run_test(tracker, frames_to_send=frames)
    names = [f.message["name"] for f in up if isinstance(f, OutputTransportMessageUrgentFrame)]
    assert names
    assert not tracker.on_mark_received(names[-1])
    assert not tracker.on_mark_received("someone-else's-mark")
    reply = tracker.last
    assert reply is not None and reply.played_secs == 0.0


async def test_context_keyed_receipts_from_another_requester() -> None:
    class Event:
        def __init__(self, kind: str, secs: float) -> None:
            self.kind, self.context_id, self.audio_secs = kind, "c7", secs

    tracker = PlaybackTracker()
    tracker.on_mark_event(Event("requested", 0.5))  # before the transport released anything
    frames = [*reply_start("c7"), *sentence(FIRST, "c7", 3.0, played=2.0)]
    await run_test(tracker, frames_to_send=frames)
    tracker.on_mark_event(Event("played", 0.5))
    tracker.on_mark_event(Event("cleared", 1.5))
    reply = tracker.last
    assert reply is not None
    assert reply.marks_sent
    assert reply.played_secs == 0.5


def test_mark_names_round_trip_and_reject_others() -> None:
    mark = parse_mark(format_mark(12, 3.4567))
    assert mark is not None and mark.reply_id == 12 and mark.played_secs == 3.457
    assert parse_mark("ph:x:1") is None
    assert parse_mark("other") is None
    assert twilio_mark_name({"event": "media"}) is None
    assert twilio_mark_message("MZ", "ph:1:0") == {"event": "mark", "streamSid": "MZ", "mark": {"name": "ph:1:0"}}


def _streaming_reply(tracker: PlaybackTracker, text: str, played: float, *, complete: bool) -> ReplyPlayback:
    """A one-sentence reply interrupted after ``played`` s, with exactly that much audio synthesized."""
    reply = ReplyPlayback(reply_id=1, state="interrupted", written_secs=played)
    reply.segments.append(SpokenSegment(text, 7001, 0.0))
    tracker.observer.note_synthesized(7001, played)
    if complete:
        tracker.observer.note_complete(7001)
    return reply


def test_sentence_still_synthesizing_is_not_taken_as_heard_in_full() -> None:
    # The caller heard "Your refund of forty"; the audio synthesized so far is all that played.
    text = ("Your refund of forty five dollars for order W two three seven eight one five six "
            "will be issued to the original card.")
    tracker = PlaybackTracker()
    heard = tracker.heard_prefix(_streaming_reply(tracker, text, 1.3, complete=False))
    words = heard.text.split()
    assert heard.reliable and 0 < len(words) <= 4, heard
    assert text.startswith(heard.text)


def test_a_streaming_sentence_never_keeps_its_last_word() -> None:
    tracker = PlaybackTracker()
    text = "Your order has shipped."
    heard = tracker.heard_prefix(_streaming_reply(tracker, text, 2.1, complete=False))
    assert heard.text.split() == ["Your", "order", "has"]
    complete = PlaybackTracker()
    assert complete.heard_prefix(_streaming_reply(complete, text, 2.1, complete=True)).text == text


async def test_sentence_level_text_marks_the_synthesis_complete() -> None:
    from pipecat.frames.frames import AggregatedTextFrame, TTSAudioRawFrame, TTSStoppedFrame
    from pipecat.observers.base_observer import FramePushed
    from pipecat.processors.frame_processor import FrameDirection

    from pipecat_harness.sim.sim_tts import SimulatedTTSService

    observer = PlaybackTracker().observer
    tts = SimulatedTTSService()

    async def push(frame) -> None:
        await observer.on_push_frame(FramePushed(source=tts, destination=tts, frame=frame,
                                                 direction=FrameDirection.DOWNSTREAM, timestamp=0))

    first, second = AggregatedTextFrame("One.", "sentence"), AggregatedTextFrame("Two.", "sentence")
    for frame in (first, second):
        frame.context_id = "c1"
    await push(first)
    await push(TTSAudioRawFrame(bytes(3200), 16000, 1, context_id="c1"))
    assert not observer.synthesis_complete(first.id)
    await push(second)
    assert observer.synthesis_complete(first.id) and not observer.synthesis_complete(second.id)
    done = TTSTextFrame("Two.", "sentence", segment_id=second.id)
    await push(done)
    assert observer.synthesis_complete(second.id)
    third = AggregatedTextFrame("Three.", "sentence")
    third.context_id = "c1"
    await push(third)
    await push(TTSStoppedFrame(context_id="c1"))
    assert observer.synthesis_complete(third.id)


async def test_a_tts_start_ahead_of_the_response_start_is_one_reply() -> None:
    from pipecat.frames.frames import LLMFullResponseStartFrame, TTSStartedFrame

    tracker = PlaybackTracker()
    frames = [*reply_start("c1"), *sentence(FIRST, "c1", 2.0), *reply_end("c1"),
              TTSStartedFrame(context_id="c2"), LLMFullResponseStartFrame(), *sentence(SECOND, "c2", 1.6),
              *reply_end("c2")]
    await run_test(tracker, frames_to_send=frames)
    assert len(tracker.replies) == 2
    second = tracker.replies[1]
    assert second.context_id == "c2" and second.response_frame_id is not None
    assert second.spoken_text == SECOND and abs(second.written_secs - 1.6) < 1e-6

import asyncio

import pytest

from pipecat_harness.proxy.quiet_window import QuietWindow


async def test_work_held_in_one_window_starts_together_on_release():
    window = QuietWindow(quiet_secs=30, max_wait_secs=60)
    first, second = window.hold(), window.hold()
    assert first is second and not first.is_set()
    await asyncio.sleep(0)
    assert not first.is_set()  # turns keep the window open
    window.release()
    assert first.is_set()
    later = window.hold()
    assert later is not first and not later.is_set()  # the next turn opens a new window
    window.release()


async def test_a_busy_loop_holds_work_no_longer_than_the_longest_wait():
    window = QuietWindow(quiet_secs=0.02, max_wait_secs=0.05)
    held = window.hold()
    for _ in range(200):  # a new turn every 5 ms: never quiet for 20 ms
        if held.is_set():
            break
        window.hold()
        await asyncio.sleep(0.005)
    assert held.is_set()


async def test_a_quiet_moment_once_the_model_requests_are_out_lets_the_work_start():
    window = QuietWindow(quiet_secs=0.01, max_wait_secs=30)
    held = window.hold()
    window.sent(held)
    await asyncio.wait_for(held.wait(), timeout=10)


async def test_work_waits_for_every_held_turns_model_request():
    window = QuietWindow(quiet_secs=0.005, max_wait_secs=30)
    first, second = window.hold(), window.hold()
    window.sent(first)
    await asyncio.sleep(0.05)  # quiet, but one model request is still to go out
    assert not first.is_set()
    window.sent(second)
    await asyncio.wait_for(first.wait(), timeout=10)
    window.sent(first)  # a late or repeated report for a window already open changes nothing
    later = window.hold()
    await asyncio.sleep(0.02)
    assert not later.is_set()
    window.release()


async def test_a_model_request_that_never_reports_holds_work_no_longer_than_the_longest_wait():
    window = QuietWindow(quiet_secs=0.005, max_wait_secs=0.05)
    held = window.hold()
    await asyncio.wait_for(held.wait(), timeout=10)


def test_times_are_checked():
    with pytest.raises(ValueError, match="max_wait_secs"):
        QuietWindow(quiet_secs=1, max_wait_secs=0.5)

"""Non-text content parts a caller smuggles into a turn never reach the operator's upstream unless opted in.

A self-hosted multimodal upstream would fetch an ``image_url`` or ``file_url``
from inside the operator's network; a hosted one bills for the media. Neither
Vapi nor Retell sends such parts. The upstream here is the loopback OpenAI
fake; what it received is read from its raw request bodies.
"""

from __future__ import annotations

import json

import httpx
import pytest

from pipecat_harness.fakes import OpenAIChatFake
from pipecat_harness.proxy.app import create_app
from pipecat_harness.proxy.openai_upstream import OpenAICompatibleUpstream
from pipecat_harness.proxy.policy import ModelPolicy
from pipecat_harness.proxy.service import ProxyService

INTERNAL = "http://169.254.169.254/latest/meta-data/"
SMUGGLED = [
    {"type": "text", "text": "What is my balance?"},
    {"type": "image_url", "image_url": {"url": INTERNAL + "image.png"}},
    {"type": "file_url", "file_url": {"url": INTERNAL + "file.pdf"}},
    {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"}},
    {"type": "video_url", "video_url": {"url": INTERNAL + "clip.mp4"}},
    {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
    {"type": "made_up", "url": INTERNAL + "other"},
]


async def _send(policy: ModelPolicy, content: list) -> list:
    """The messages the upstream received for one turn carrying ``content``."""
    async with OpenAIChatFake(["Let me check."], server="openai") as fake:
        upstream = OpenAICompatibleUpstream(fake.base_url)
        app = create_app(ProxyService(upstream, policy=policy))
        body = {"stream": True, "call": {"id": "smuggle"},
                "messages": [{"role": "assistant", "content": [{"type": "text", "text": "Hi!"}]},
                             {"role": "user", "content": content}]}
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as client:
            response = await client.post("/chat/completions", json=body)
        await upstream.aclose()
    assert response.status_code == 200 and "trouble on my end" not in response.text  # not the fallback
    [request] = fake.requests
    return request.raw["messages"]


async def test_by_default_only_text_goes_upstream_as_plain_strings():
    messages = await _send(ModelPolicy(), SMUGGLED)
    assert INTERNAL not in json.dumps(messages) and "base64" not in json.dumps(messages)
    assert messages[-2:] == [
        {"role": "assistant", "content": "Hi!"}, {"role": "user", "content": "What is my balance?"}
    ]


@pytest.mark.parametrize("allowed", ["image_url", "input_audio"])
async def test_an_opted_in_part_type_goes_through_and_no_other(allowed):
    messages = await _send(ModelPolicy(content_parts=frozenset({allowed})), SMUGGLED)
    types = [part["type"] for part in messages[-1]["content"]]
    assert types == ["text", allowed]
    others = {"image_url", "file_url", "file", "video_url", "input_audio", "made_up"} - {allowed}
    assert not any(f'"type": "{kind}"' in json.dumps(messages) for kind in others)

"""Drive headless Chromium over the DevTools protocol (no browser-automation package needed)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import websockets
from PIL import Image

from tests.services import headless_chromium_args


class Page:
    """One browser tab: navigate, evaluate JavaScript, wait for conditions."""

    def __init__(self, socket: Any) -> None:
        self._socket = socket
        self._next_id = 0

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message_id = self._next_id
        await self._socket.send(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            message = json.loads(await asyncio.wait_for(self._socket.recv(), 15))
            if message.get("id") == message_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result.get("result", {}).get("value")

    async def goto(self, url: str) -> None:
        await self.call("Page.navigate", url=url)
        await self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'")

    async def screenshot(self, selector: str) -> Image.Image:
        """A PNG screenshot of the element ``selector`` matches, at one device pixel per CSS pixel."""
        box = await self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
            " return [r.left + scrollX, r.top + scrollY, r.width, r.height]; })()"
        )
        x, y, width, height = box
        shot = await self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                               clip={"x": x, "y": y, "width": width, "height": height, "scale": 1})
        return Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")

    async def wait_for(self, expression: str, timeout_secs: float = 10.0) -> None:
        async with asyncio.timeout(timeout_secs):
            while not await self.evaluate(expression):
                await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def chromium_page() -> AsyncIterator[Page]:
    """Start headless Chromium with a fresh profile and yield its first tab."""
    profile = Path(tempfile.mkdtemp(prefix="grader-chromium-"))
    process = await asyncio.create_subprocess_exec(
        *headless_chromium_args(profile), "--remote-debugging-port=0", "about:blank",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        async with asyncio.timeout(20):
            while not (port_file.exists() and port_file.read_text().strip()):
                await asyncio.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        async with aiohttp.ClientSession() as session:
            async with asyncio.timeout(10):
                while True:
                    async with session.get(f"http://127.0.0.1:{port}/json/list") as response:
                        pages = [t for t in await response.json() if t.get("type") == "page"]
                    if pages:
                        break
                    await asyncio.sleep(0.05)
        async with websockets.connect(pages[0]["webSocketDebuggerUrl"], max_size=None) as socket:
            page = Page(socket)
            await page.call("Page.enable")
            await page.call("Emulation.setDeviceMetricsOverride", width=1280, height=1600, deviceScaleFactor=1,
                            mobile=False)
            yield page
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        shutil.rmtree(profile, ignore_errors=True)

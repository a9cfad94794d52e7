"""A content-addressed disk cache for synthesised caller audio and its transcripts."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

__all__ = ["AudioCache", "default_cache_dir", "write_atomically"]

_ENV = "PIPECAT_HARNESS_AUDIO_CACHE"


def default_cache_dir() -> Path:
    """``$PIPECAT_HARNESS_AUDIO_CACHE``, else ``~/.cache/pipecat-harness/audio``."""
    configured = os.environ.get(_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "pipecat-harness" / "audio"


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename: parallel runs never read half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as tmp:
        tmp.write(data)
    os.replace(tmp.name, path)


def digest(*parts: str | bytes) -> str:
    """A stable hash of the parts (text is UTF-8 encoded)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8") if isinstance(part, str) else part)
        h.update(b"\x00")
    return h.hexdigest()


class AudioCache:
    """Synthesised PCM under ``tts/``, transcripts under ``asr/``, one small file per entry below ``directory``."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or default_cache_dir()
        self.hits = 0
        self.misses = 0

    def audio(self, key: str) -> bytes | None:
        """Cached PCM for ``key``, if any."""
        return self._read(self.directory / "tts" / f"{key}.pcm")

    def put_audio(self, key: str, pcm: bytes) -> None:
        """Store PCM for ``key``."""
        write_atomically(self.directory / "tts" / f"{key}.pcm", pcm)

    def transcript(self, key: str) -> str | None:
        """Cached transcript for ``key``, if any."""
        data = self._read(self.directory / "asr" / f"{key}.json")
        return None if data is None else str(json.loads(data.decode("utf-8"))["text"])

    def put_transcript(self, key: str, text: str, **about: object) -> None:
        """Store a transcript for ``key`` (with what produced it)."""
        payload = json.dumps({"text": text, **about}, ensure_ascii=False).encode("utf-8")
        write_atomically(self.directory / "asr" / f"{key}.json", payload)

    def _read(self, path: Path) -> bytes | None:
        if not path.exists():
            self.misses += 1
            return None
        self.hits += 1
        return path.read_bytes()

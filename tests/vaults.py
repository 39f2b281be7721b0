"""Test helper: write a note into a temporary vault (text or bytes, optional mtime)."""

import os
from pathlib import Path


def write(vault: Path, rel: str, data, mtime=None) -> Path:
    p = vault / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        p.write_bytes(data)
    else:
        p.write_text(data, encoding="utf-8")
    if mtime is not None:
        os.utime(p, (mtime, mtime))
    return p

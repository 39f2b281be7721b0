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


def index_file(d: Path, kind: str) -> Path:
    """The file of an index dir that holds `kind`: "files.json", "idf.npy", or a file of
    its first segment ("vectors.npy", "chunks.json", "rows.npy", "text")."""
    import json
    m = json.loads((Path(d) / "manifest.json").read_text())
    if kind == "files.json":
        return Path(d) / m["files_file"]
    if kind == "idf.npy":
        return Path(d) / m["idf_file"]
    return Path(d) / f"{m['segments'][0]['name']}.{kind}"

"""The file records by column: one record per note, stored so that a question reads
only the fields it uses.

In:  the file records of an ingest (dicts with the same keys), or the bytes of a
     g<N>.files.cols written from them, with the delta of the records now.
Out: encode(records) -> bytes; Files, a sequence of records read lazily: column(key)
     decodes one field of every note (a question needs path, dates, family, copy and
     privacy marks: a fifth of the bytes), files[i] is a read-only view that decodes a
     column when one of its fields is first read, dicts() every record as a dict (an
     ingest, which carries every field over); ByPath, path -> record, from the paths
     alone.
Not: checking digests or naming the fix (store_load.py), deciding records (ingest.py).

The bytes: one JSON header line {"n", "columns": {key: [offset, length]}}, then each
column as one JSON list of n values, at its offset after the header line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence


def encode(records: list) -> bytes:
    """The columns of records (every key of the first; a missing one reads as None)."""
    keys = list(records[0]) if records else []
    blobs, spans, at = [], {}, 0
    for k in keys:
        blob = json.dumps([r.get(k) for r in records], ensure_ascii=False,
                          separators=(",", ":")).encode("utf-8")
        spans[k] = [at, len(blob)]
        blobs.append(blob)
        at += len(blob)
    head = json.dumps({"n": len(records), "columns": spans}, separators=(",", ":"))
    return head.encode("utf-8") + b"\n" + b"".join(blobs)


class Columns:
    """The decoded header of encoded bytes, each column decoded when first asked for.
    ValueError when the header or a column does not parse or has the wrong length."""

    def __init__(self, raw: bytes):
        end = raw.find(b"\n")
        head = json.loads(raw[:end]) if end > 0 else None
        if not isinstance(head, dict) or not isinstance(head.get("columns"), dict):
            raise ValueError("no column header")
        self.raw, self.start, self.n = raw, end + 1, int(head["n"])
        self.spans, self.cols, self._dicts = head["columns"], {}, None
        self.keys = list(self.spans)

    def column(self, key: str) -> list:
        col = self.cols.get(key)
        if col is None:
            at, size = self.spans[key]                   # KeyError: no such field
            col = json.loads(self.raw[self.start + at:self.start + at + size])
            if not isinstance(col, list) or len(col) != self.n:
                raise ValueError(f"column {key} has the wrong length")
            self.cols[key] = col
        return col

    def equals(self, i: int, rec: dict) -> bool:
        """Whether record i is rec (dict(Record(self, i)) == rec), comparing the fields
        already decoded first: a record that differs in one of them (an edited note's
        size) decodes no other column."""
        if len(rec) != len(self.keys) or not all(k in rec for k in self.keys):
            return False
        keys = sorted(self.keys, key=lambda k: k not in self.cols)
        return all(self.column(k)[i] == rec[k] for k in keys)

    def dicts(self) -> list[dict]:
        """Every record as a dict (built once)."""
        if self._dicts is None:
            cols = [self.column(k) for k in self.keys]
            self._dicts = ([dict(zip(self.keys, row)) for row in zip(*cols)] if self.keys
                           else [{} for _ in range(self.n)])
        return self._dicts


class Record(Mapping):
    """One note's record as a read-only mapping over the columns."""

    __slots__ = ("_cols", "_at")

    def __init__(self, cols: Columns, at: int):
        self._cols, self._at = cols, at

    def __getitem__(self, key):
        return self._cols.column(key)[self._at]

    def __iter__(self):
        return iter(self._cols.keys)

    def __len__(self) -> int:
        return len(self._cols.keys)

    def __repr__(self) -> str:
        return repr(dict(self))


class Files(Sequence):
    """The records now: the base's columns, with entries (a delta: per record its
    position in the base, or the record itself as a dict) or None (the base as it is).
    Equal to a list of the same records."""

    def __init__(self, base: Columns, entries: list | None = None):
        self.base, self.entries = base, entries
        self._cols: dict[str, list] = {}
        self._at = self._own = None

    def __len__(self) -> int:
        return self.base.n if self.entries is None else len(self.entries)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        e = i if self.entries is None else self.entries[i]
        if isinstance(e, dict):
            return e
        if not -self.base.n <= e < self.base.n:
            raise IndexError("file record out of range")
        return Record(self.base, e % self.base.n)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(other) == len(self) and all(dict(a) == dict(b) for a, b in zip(self, other))

    __hash__ = None

    def column(self, key: str) -> list:
        """One field of every record, in order (None where a record lacks it)."""
        col = self._cols.get(key)
        if col is None:
            base = self.base.column(key) if key in self.base.spans else [None] * self.base.n
            if self.entries is None:
                col = base
            else:                      # the base's values by position, then the dicts
                if self._at is None:
                    self._at = [0 if type(e) is dict else e for e in self.entries]
                    self._own = [(j, e) for j, e in enumerate(self.entries)
                                 if type(e) is dict]
                col = (list(map(base.__getitem__, self._at)) if base
                       else [None] * len(self._at))
                for j, e in self._own:
                    col[j] = e.get(key)
            self._cols[key] = col
        return col

    def dicts(self) -> list[dict]:
        """Every record now as a dict; records the delta did not change are the base's."""
        base = self.base.dicts()
        if self.entries is None:
            return base
        return [e if isinstance(e, dict) else base[e] for e in self.entries]


class ByPath(Mapping):
    """path -> its record, knowing only the paths until a record is asked for."""

    def __init__(self, files: Files):
        self.files = files
        self.at = {p: i for i, p in enumerate(files.column("path"))}

    def __getitem__(self, path):
        return self.files[self.at[path]]

    def __contains__(self, path) -> bool:
        return path in self.at

    def __iter__(self):
        return iter(self.at)

    def __len__(self) -> int:
        return len(self.at)


def dicts(files) -> list[dict]:
    """Records as dicts, from Files or from a plain list of dicts (a build in memory)."""
    return files.dicts() if isinstance(files, Files) else list(files)


def column(files, key: str) -> list:
    """One field of every record, from Files or from a plain list of dicts."""
    return files.column(key) if isinstance(files, Files) else [f.get(key) for f in files]

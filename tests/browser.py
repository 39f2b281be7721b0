"""Headless Chromium over the DevTools pipe (stdlib only): load a page, collect console
errors, exceptions, failed loads and every network request, take a PNG screenshot.

    python tests/browser.py PAGE.html OUT.png [--width 1000] [--height 1300]

makes the README screenshots. The tests import load() and non_white().
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")
TIMEOUT = 30            # seconds per page


def find() -> str | None:
    """The path of a Chromium-like browser, or None."""
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


class _Pipe:
    """CDP over --remote-debugging-pipe: NUL-terminated JSON on fds 3 (in) and 4 (out)."""

    def __init__(self, exe: str, profile: str):
        to_chrome, self._w = os.pipe()
        self._r, from_chrome = os.pipe()
        args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-extensions", "--disable-background-networking",
                "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
                f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"]
        fds = {3: to_chrome, 4: from_chrome}

        def child():   # via high fds first, so that no dup2 clobbers the other pipe
            high = {fd: fcntl.fcntl(src, fcntl.F_DUPFD, 10) for fd, src in fds.items()}
            for fd, src in high.items():
                os.dup2(src, fd)
        self.proc = subprocess.Popen(args, pass_fds=(3, 4), preexec_fn=child,
                                     start_new_session=True, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        os.close(to_chrome)
        os.close(from_chrome)
        self._buf, self._id, self.events = b"", 0, []
        self.deadline = time.monotonic() + TIMEOUT

    def send(self, method: str, session=None, **params) -> dict:
        """Send one command; return its result, keeping the events seen meanwhile."""
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait(self, found, session: str) -> dict:
        """The first event for which found(event) holds; a JavaScript dialog (alert)
        meanwhile is dismissed and stays among the events (an error: our pages run no
        script)."""
        seen = 0
        while True:
            for i, e in enumerate(self.events):
                if found(e):
                    return self.events.pop(i)
            self.events.append(self._read())
            if self.events[-1].get("method") == "Page.javascriptDialogOpening" and \
                    len(self.events) > seen:
                seen = len(self.events)
                self.send("Page.handleJavaScriptDialog", session=session, accept=False)

    def _read(self) -> dict:
        while b"\0" not in self._buf:
            if not select.select([self._r], [], [], max(0.0, self.deadline -
                                                       time.monotonic()))[0]:
                raise TimeoutError(f"the browser did not answer within {TIMEOUT} s")
            chunk = os.read(self._r, 1 << 16)
            if not chunk:
                raise RuntimeError("the browser closed the DevTools pipe")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\0", 1)
        return json.loads(line)

    def close(self) -> None:
        """Ask the browser to quit; kill its process group (only it) if it lingers."""
        try:
            os.write(self._w, json.dumps({"id": 0, "method": "Browser.close"}).encode()
                     + b"\0")
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        gone = time.monotonic() + 3
        while time.monotonic() < gone:   # helpers left in its group: the profile dir
            try:                         # is removed only once they have exited
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                break
            self.proc.poll()             # reap the browser itself once it is killed
            time.sleep(0.05)
        self.proc.wait()
        os.close(self._w)
        os.close(self._r)


def load(pages, width=1000, height=1300, exe=None) -> list[dict]:
    """Open each page in one headless Chromium, a fresh tab each: per page
    {"errors": [...], "requests": [urls], "png": viewport screenshot bytes, "title"}."""
    exe = exe or find()
    assert exe, "no Chromium found"
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        b = _Pipe(exe, profile)
        try:
            return [_visit(b, Path(p).resolve().as_uri(), width, height) for p in pages]
        finally:
            b.close()


def _visit(b: _Pipe, url: str, width: int, height: int) -> dict:
    b.deadline = time.monotonic() + TIMEOUT
    target = b.send("Target.createTarget", url="about:blank")["targetId"]
    s = b.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        b.send(f"{domain}.enable", session=s)
    b.send("Emulation.setDeviceMetricsOverride", session=s, width=width, height=height,
           deviceScaleFactor=1, mobile=False)
    b.send("Page.setLifecycleEventsEnabled", session=s, enabled=True)
    loader = b.send("Page.navigate", session=s, url=url)["loaderId"]
    b.wait(lambda e: e.get("method") == "Page.lifecycleEvent" and e["params"].get(
        "name") == "load" and e["params"].get("loaderId") == loader, s)  # this page's load
    title = b.send("Runtime.evaluate", session=s, expression="document.title",
                   returnByValue=True)["result"].get("value")
    png = base64.b64decode(b.send("Page.captureScreenshot", session=s, format="png")["data"])
    b.send("Target.closeTarget", targetId=target)
    errors, requests = [], []
    events, b.events = b.events, []
    for e in events:
        if e.get("sessionId") != s:
            continue
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errors.append("console: " + " ".join(str(a.get("value", a.get("description")))
                                                 for a in p.get("args", [])))
        elif m == "Runtime.exceptionThrown":
            errors.append("exception: " + p["exceptionDetails"].get("text", ""))
        elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
            errors.append("log: " + p["entry"].get("text", ""))
        elif m == "Page.javascriptDialogOpening":
            errors.append(f"dialog: {p.get('type')} {p.get('message')}")
        elif m == "Network.loadingFailed":
            errors.append("load failed: " + p.get("errorText", ""))
        elif m == "Network.requestWillBeSent":
            requests.append(p["request"]["url"])
    return {"errors": errors, "requests": requests, "png": png, "title": title}


def _unfilter(raw: bytes, w: int, h: int, bpp: int) -> np.ndarray:
    """PNG scanline filters undone: uint8 [h, w * bpp]."""
    stride, out = w * bpp, np.zeros((h, w * bpp), np.uint8)
    prev = np.zeros(stride, np.int32)
    for y in range(h):
        ftype, line = raw[y * (stride + 1)], raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)]
        cur = np.frombuffer(line, np.uint8).astype(np.int32)
        if ftype == 2:
            cur = (cur + prev) & 255
        elif ftype == 1:     # sub: running sum per channel
            cur = (np.cumsum(cur.reshape(-1, bpp), axis=0) & 255).reshape(-1)
        elif ftype in (3, 4):
            cur = _unfilter_slow(cur.tolist(), prev.tolist(), bpp, ftype)
        out[y], prev = cur, cur
    return out


def _unfilter_slow(cur: list, prev: list, bpp: int, ftype: int) -> np.ndarray:
    for i in range(len(cur)):
        a = cur[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if ftype == 3:
            cur[i] = (cur[i] + (a + b) // 2) & 255
        else:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    return np.array(cur, np.int32)


def decode_png(data: bytes) -> np.ndarray:
    """8-bit RGB or RGBA PNG -> uint8 [h, w, channels] (enough for screenshots)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and not interlace, "unsupported PNG"
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + n
    bpp = 3 if colour == 2 else 4
    return _unfilter(zlib.decompress(b"".join(idat)), w, h, bpp).reshape(h, w, bpp)


def non_white(png: bytes) -> float:
    """Share of pixels that are not (near) white."""
    rgb = decode_png(png)[..., :3].astype(np.int32)
    return float((rgb.min(axis=2) < 240).mean())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("page")
    p.add_argument("out")
    p.add_argument("--width", type=int, default=1000)
    p.add_argument("--height", type=int, default=1300)
    args = p.parse_args(argv)
    got = load([args.page], args.width, args.height)[0]
    Path(args.out).write_bytes(got["png"])
    print(f"{args.out}: {len(got['png'])} bytes, {100 * non_white(got['png']):.1f}% "
          f"non-white, errors: {got['errors'] or 'none'}")
    return 1 if got["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())

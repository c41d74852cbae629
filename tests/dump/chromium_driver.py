"""Drive Debian's headless Chromium over the DevTools protocol on a pipe (no sockets).

Used by the HTML page tests and ``benchmarks/html_bench.py``: load a file:// page, wait
until it writes ``data-rendered-nodes`` on <body>, and record every request the page
made (``Network.requestWillBeSent``), console errors and uncaught exceptions.

Chromium is started with ``--remote-debugging-pipe``: it reads NUL-terminated JSON
commands from fd 3 and writes replies and events to fd 4.  Every network-capable
feature is switched off on the command line and all host names resolve to nothing, so
even a page that tried to load a remote URL could not reach the network.
"""
from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

CHROMIUM = "/usr/bin/chromium"

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--mute-audio",
    "--host-resolver-rules=MAP * ~NOTFOUND", "--remote-debugging-pipe",
]

LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")


def chromium_path() -> str | None:
    """The Chromium binary, or None (callers skip with a reason)."""
    path = os.environ.get("HLO_OPT_CHROMIUM", CHROMIUM)
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


@dataclass
class PageResult:
    url: str
    rendered_nodes: int | None          # value of data-rendered-nodes, None on timeout
    seconds_to_render: float | None     # wall clock from navigate to the attribute
    page_render_ms: float | None        # the page's own performance.now() at render
    requests: list[str] = field(default_factory=list)
    remote_requests: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    body_attrs: dict = field(default_factory=dict)
    evaluated: object = None


class ChromiumError(RuntimeError):
    pass


def _high_fd(fd: int) -> int:
    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return new


class Chromium:
    """One headless Chromium process; use as a context manager."""

    def __init__(self, binary: str | None = None, extra_flags=()):
        self.binary = binary or chromium_path()
        if self.binary is None:
            raise ChromiumError(f"{CHROMIUM} not found")
        self.profile = tempfile.mkdtemp(prefix="hlo-opt-chromium-")
        self._stderr = open(os.path.join(self.profile, "stderr.log"), "wb")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # Keep the child's ends away from 3 and 4 so that dup2 can place them there.
        to_child_r, from_child_w = (_high_fd(to_child_r), _high_fd(from_child_w))
        args = [self.binary, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}",
                *extra_flags, "about:blank"]

        def place_pipe_fds():  # runs in the child before exec: fd 3 in, fd 4 out
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self.proc = subprocess.Popen(args, preexec_fn=place_pipe_fds, close_fds=False,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self._stderr)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._next_id = 0
        self._events: list[dict] = []

    # ---- protocol ---------------------------------------------------------------------
    def _read_message(self, deadline: float) -> dict | None:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self._from_child], [], [], min(left, 0.5))
            if not ready:
                if self.proc.poll() is not None:
                    raise ChromiumError(f"chromium exited with {self.proc.returncode}: "
                                        f"{self.stderr_tail()}")
                continue
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise ChromiumError("chromium closed the DevTools pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30.0) -> dict:
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply is None:
                raise ChromiumError(f"no reply to {method} within {timeout} s")
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise ChromiumError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self._events.append(reply)

    def drain_events(self, seconds: float = 0.0) -> list[dict]:
        deadline = time.monotonic() + seconds
        while True:
            msg = self._read_message(deadline)
            if msg is None:
                break
            if "method" in msg:
                self._events.append(msg)
        events, self._events = self._events, []
        return events

    # ---- page loading -----------------------------------------------------------------
    def load(self, url: str, timeout: float = 60.0, evaluate: str | None = None) -> PageResult:
        """Open ``url`` in a fresh tab; wait for data-rendered-nodes (or an error)."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget",
                            {"targetId": target, "flatten": True})["sessionId"]
        try:
            for domain in ("Network", "Page", "Runtime", "Log"):
                self.send(f"{domain}.enable", session=session)
            self.drain_events()
            t0 = time.monotonic()
            self.send("Page.navigate", {"url": url}, session=session)
            probe = ("(() => { const b = document.body; if (!b) return null;"
                     " const n = b.getAttribute('data-rendered-nodes');"
                     " const e = b.getAttribute('data-render-error');"
                     " return (n === null && e === null) ? null : [n, e]; })()")
            found, seconds = None, None
            deadline = t0 + timeout
            while time.monotonic() < deadline:
                r = self.send("Runtime.evaluate", {"expression": probe, "returnByValue": True},
                              session=session)
                value = r.get("result", {}).get("value")
                if value is not None:
                    seconds = time.monotonic() - t0
                    found = value
                    break
                time.sleep(0.01)
            attrs = self.send("Runtime.evaluate", {
                "expression": "document.body ? Object.fromEntries([...document.body.attributes]"
                              ".map(a => [a.name, a.value])) : {}",
                "returnByValue": True}, session=session).get("result", {}).get("value", {})
            evaluated = None
            if evaluate:
                evaluated = self.send("Runtime.evaluate", {
                    "expression": evaluate, "returnByValue": True, "awaitPromise": True},
                    session=session).get("result", {}).get("value")
            events = self.drain_events(0.2)
        finally:
            self.send("Target.closeTarget", {"targetId": target})
        result = PageResult(url, None, None, None, body_attrs=attrs or {}, evaluated=evaluated)
        if found is not None:
            n, err = found
            result.rendered_nodes = int(n) if n is not None else None
            result.seconds_to_render = seconds
            if err:
                result.errors.append(f"page: {err}")
        if attrs and attrs.get("data-render-ms"):
            result.page_render_ms = float(attrs["data-render-ms"])
        for ev in events:
            method, params = ev["method"], ev.get("params", {})
            if method == "Network.requestWillBeSent":
                u = params["request"]["url"]
                result.requests.append(u)
                if not u.startswith(LOCAL_SCHEMES):
                    result.remote_requests.append(u)
            elif method == "Network.loadingFailed":
                result.failed_requests.append(f"{params.get('errorText')} "
                                              f"{params.get('blockedReason', '')}".strip())
            elif method == "Runtime.exceptionThrown":
                d = params.get("exceptionDetails", {})
                result.errors.append("exception: " + (d.get("exception", {}).get("description")
                                                      or d.get("text", "")))
            elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                result.errors.append("console.error: " + " ".join(
                    str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                result.errors.append("log: " + params["entry"].get("text", ""))
        return result

    def stderr_tail(self, n: int = 2000) -> str:
        try:
            with open(os.path.join(self.profile, "stderr.log"), "rb") as f:
                return f.read().decode(errors="replace")[-n:]
        except OSError:
            return ""

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self.send("Browser.close", timeout=5)
                except (ChromiumError, OSError):
                    pass
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            for fd in (self._to_child, self._from_child):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._stderr.close()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

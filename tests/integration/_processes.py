"""Processes a test may leave behind: what a run started under this process, and what a
killed job's children (no longer under it) inherited."""

from __future__ import annotations

import os
from pathlib import Path

BROWSER = ("chromium", "chromedriver")
"""Programs of the browser tests' session fixtures (tests/browser): a browser starts and
ends helper processes of its own at any moment, under whichever test process holds it."""


def working_under(root: int) -> list[str]:
    """Processes under ``root`` that do work, as ``"pid: command line"``. Not counted:
    ``root``'s own fork server and resource tracker, which live as long as it does (what
    the fork server started is counted: a worker's parent is the fork server, whose
    command line it shows), a Ray cluster the session started, with its workers, and the
    browser tests' browser (:data:`BROWSER`), with its helpers."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            ppid = next(int(line.split()[1]) for line in status.splitlines()
                        if line.startswith("PPid:"))  # fmt: skip
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "/site-packages/ray/" in cmdline or cmdline.startswith("ray::"):
            continue  # the session's Ray cluster, and what it started
        if any(name in cmdline.split(" ", 1)[0] for name in BROWSER):
            continue  # the browser tests' browser, and the helpers it starts as it goes
        todo += children.get(pid, [])
        kept = "forkserver" in cmdline or "resource_tracker" in cmdline
        if not (kept and pid in children.get(root, [])):
            found.append(f"{pid}: {cmdline[:80]}")
    return found


class Leftovers:
    """What a test leaves working under this process: made at its start (what a
    session's fixtures started before it, a browser, a cluster, is not counted), called
    at its end."""

    def __init__(self) -> None:
        self.before = set(working_under(os.getpid()))

    def __call__(self) -> list[str]:
        return sorted(set(working_under(os.getpid())) - self.before)


def marked(mark: str) -> list[int]:
    """Processes whose environment holds ``HF_TEST_MARK=mark`` (a killed job's children
    are no longer under this process: they are found by what they inherited)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes() if entry.isdigit() else b""
        except OSError:
            continue
        if f"HF_TEST_MARK={mark}".encode() in environ.split(b"\0"):
            found.append(int(entry))
    return found


def reading(path: Path) -> list[int]:
    """The processes that hold ``path`` open."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fds = os.listdir(f"/proc/{entry}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    if os.readlink(f"/proc/{entry}/fd/{fd}") == str(path):
                        found.append(int(entry))
                        break
                except OSError:
                    continue
    return found

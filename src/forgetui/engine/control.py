"""Pause and stop for a run in progress, driven by a UI (the TUI's pause key, "stop after this").

The engine calls :meth:`RunControl.checkpoint` before it sends each request. Pausing holds the run
there (the request in flight, if any, finishes normally); "stop after current" makes the next
checkpoint end the run as *interrupted*, exactly like Ctrl-C but without cancelling anything, so the
run stays resumable. Cancelling the request in flight is done by cancelling the run's task.
"""

from __future__ import annotations

import asyncio


class RunStopped(Exception):
    """Raised at a checkpoint after a stop was requested; the runner saves the run as interrupted."""


class RunControl:
    """Shared by the runner (which waits on it) and a UI (which sets it). Single event loop only."""

    def __init__(self) -> None:
        self._running = asyncio.Event()
        self._running.set()
        self.stop_requested = False

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def stop_after_current(self) -> None:
        """End the run at the next request boundary; also releases a pause so the stop happens."""
        self.stop_requested = True
        self._running.set()

    async def checkpoint(self) -> None:
        """Wait while paused; raise RunStopped once a stop was requested."""
        if self.stop_requested:
            raise RunStopped()
        if not self._running.is_set():
            await self._running.wait()
        if self.stop_requested:
            raise RunStopped()

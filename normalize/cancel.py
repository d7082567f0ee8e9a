"""A cancel signal shared by the engine, the tools and the signal handlers."""

from __future__ import annotations

import threading
from collections.abc import Callable


class CancelToken:
    """Set once to ask everything in flight to stop; `reset` re-arms it.

    Callbacks registered with `on_cancel` run (in the cancelling thread) when
    the token is set; a running subprocess registers one to forward the signal.
    `hard` is set by a second cancel: stop at once.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []
        self.hard = False
        self.reason = ""

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: str = "cancelled") -> None:
        with self._lock:
            if self._event.is_set():
                self.hard = True
            else:
                self.reason = reason
                self._event.set()
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Register `callback`; returns a function that unregisters it."""
        with self._lock:
            self._callbacks.append(callback)

        def remove() -> None:
            with self._lock:
                if callback in self._callbacks:
                    self._callbacks.remove(callback)

        return remove

    def reset(self) -> None:
        with self._lock:
            self._event.clear()
            self.hard = False
            self.reason = ""

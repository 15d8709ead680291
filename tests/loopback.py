"""The life of a threaded stdlib HTTP fake: listen on 127.0.0.1 only, serve from a daemon thread,
stop itself after a lifetime cap. The documentation-based fakes (Ollama, LM Studio) build on it."""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOST = "127.0.0.1"


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return  # a client dropping an idle keep-alive connection: not an error
        super().handle_error(request, client_address)


class LoopbackFake:
    """Subclasses set ``handler`` (a BaseHTTPRequestHandler class that reads ``self.fake``) and
    ``max_lifetime_s``; ``start()`` (or ``with``) serves, ``stop()`` is safe to call twice and from
    the lifetime timer."""

    handler: type[BaseHTTPRequestHandler]
    thread_name = "fake-server"
    max_lifetime_s: float = 60.0

    _server: QuietServer | None = None
    _thread: threading.Thread | None = None
    _timer: threading.Timer | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return self._server.server_address[1]

    @property
    def root(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, as a user would configure it: ``http://127.0.0.1:PORT/v1``."""
        return self.root + "/v1"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> Any:
        handler = type("Handler", (self.handler,), {"fake": self})
        self._server = QuietServer((HOST, 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=self.thread_name, daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self.max_lifetime_s, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if self._timer is not None and threading.current_thread() is not self._timer:
            self._timer.cancel()
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

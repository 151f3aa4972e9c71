"""An ASGI app served by uvicorn in a background thread on 127.0.0.1 (the web envs' own sites).

The port is chosen by the OS and the socket is bound before the thread starts, so no other
process can take it. ``TCP_NODELAY`` is set on the listening socket (accepted sockets inherit
it): uvicorn writes a response's head and body separately, and without it Nagle's algorithm
and the browser's delayed ACK add about 40 ms to every page.
"""

from __future__ import annotations

import atexit
import socket
import threading
import time
from typing import Any

START_TIMEOUT_S = 20.0


class ThreadedServer:
    """One ASGI app on ``http://127.0.0.1:<port>``, served from a daemon thread.

    ``start()`` is idempotent; ``stop()`` (also registered with ``atexit``) ends the thread.
    """

    def __init__(self, app: Any):
        """Keep ``app`` (any ASGI application); nothing is bound until :meth:`start`."""
        self.app = app
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self.port = 0

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:41234`` (starts the server if needed)."""
        self.start()
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the serving thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Bind a free port of 127.0.0.1 and serve from a daemon thread (once)."""
        with self._lock:
            if self.running:
                return
            import uvicorn

            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.bind(("127.0.0.1", 0))
            config = uvicorn.Config(self.app, log_level="warning", lifespan="off", access_log=False)
            server = uvicorn.Server(config)
            thread = threading.Thread(
                target=server.run, kwargs={"sockets": [sock]}, name="agentgym-web", daemon=True
            )
            thread.start()
            deadline = time.monotonic() + START_TIMEOUT_S
            while not server.started:
                if not thread.is_alive() or time.monotonic() > deadline:
                    sock.close()
                    raise RuntimeError("the web env's server did not start on 127.0.0.1")
                time.sleep(0.005)
            self._server, self._thread, self._sock = server, thread, sock
            self.port = sock.getsockname()[1]
            atexit.register(self.stop)

    def stop(self) -> None:
        """Stop serving and close the socket (safe to call twice)."""
        with self._lock:
            if self._server is not None:
                self._server.should_exit = True
            if self._thread is not None:
                self._thread.join(timeout=5)
            if self._sock is not None:
                self._sock.close()
            self._server = self._thread = self._sock = None

"""Servers on 127.0.0.1 that accept connections and answer as no dask peer would: what the
``--scheduler`` check of ``puicl predict`` and ``prior-gen`` (puicl_common.dask_scheduler) must
refuse in one line, in bounded time and memory."""

from __future__ import annotations

import socket
import struct
import threading


class Stranger:
    """A server on 127.0.0.1 that accepts connections and answers as no dask peer would."""

    def __init__(self, reply: bytes | None) -> None:
        self.reply = reply
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.address = f"tcp://127.0.0.1:{self.server.getsockname()[1]}"
        self.stop = threading.Event()
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                peer, _ = self.server.accept()
            except OSError:
                continue
            self.held.append(peer)  # kept open: the client must give up by itself
            if self.reply is not None:
                peer.sendall(self.reply)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        for peer in self.held:
            peer.close()
        self.server.close()


REPLIES = {
    "silent": None,
    "http": b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
    # dask's frame header: the number of frames, then each frame's length, 4 EiB here
    "huge frame": struct.pack("<QQ", 1, 2**62),
}

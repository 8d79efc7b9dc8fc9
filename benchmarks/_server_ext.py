"""Server side of the kernel benchmarks: jupyter_server's websocket connection, counted.

``jupyter server --ServerApp.kernel_websocket_connection_class=_server_ext.CountingConnection``
behaves exactly as the default connection (this class only counts) and, when
its websocket closes, writes ``counts-<kernel id>.json`` into
``$NBS_BENCH_COUNTS_DIR``:

* ``arrived``: IOPub messages per type that reached the server from the kernel.
  The kernel's IOPub socket (ZMQ PUB) has the default high-water mark of 1000
  messages per subscriber, and the server's SUB socket another 1000: when the
  server falls further behind than that, ZMQ drops messages silently, before
  the server ever sees them. ``sent - arrived`` is that loss.
* ``dropped``: messages the server's IOPub rate limit discarded
  (``_limit_rate`` returned True; it also sends the one "IOPub message rate
  exceeded" warning to the client).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection


class CountingConnection(ZMQChannelsWebsocketConnection):
    """The default kernel websocket connection, plus counts of what arrived and was dropped."""

    def _limit_rate(self, channel: Any, msg: Any, msg_list: Any) -> bool:
        dropped = super()._limit_rate(channel, msg, msg_list)  # type: ignore[no-untyped-call]
        if channel == "iopub":
            header = msg.get("header")
            if header is None:  # limit_rate off: the base class did not parse it
                header = self.get_part("header", None, msg_list)  # type: ignore[no-untyped-call]
            kind = header.get("msg_type", "")
            counts = self.__dict__.setdefault("_nbs_counts", {"arrived": {}, "dropped": {}})
            counts["arrived"][kind] = counts["arrived"].get(kind, 0) + 1
            if dropped:
                counts["dropped"][kind] = counts["dropped"].get(kind, 0) + 1
        return bool(dropped)

    def disconnect(self) -> Any:
        out = os.environ.get("NBS_BENCH_COUNTS_DIR")
        counts = self.__dict__.get("_nbs_counts", {"arrived": {}, "dropped": {}})
        if out:
            path = Path(out) / f"counts-{self.kernel_id}.json"
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(counts))
            os.replace(tmp, path)
        return super().disconnect()  # type: ignore[no-untyped-call]

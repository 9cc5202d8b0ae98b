"""A lab that another process runs (`nslab up`, `nslab serve`), on screen: its records come from
the lab's event stream (lab/control/feed.py) into the model, its chaos goes through its control
socket as `nslab chaos` does. The lab's clock is its own: no pause, speed or step here, and
quitting leaves the lab running. Read-only (a browser viewer of `nslab serve`), the chaos keys are
hidden. When the lab ends or dies the screen says so and stays as it was, to be read.

The stream is read on Textual's asyncio loop into a list; the screen's timer feeds it to the model
a slice at a time (BUDGET), so catching up with a long run never freezes the screen.
"""

from __future__ import annotations

import asyncio
import os
import time

import msgpack

from chaos.faults import FaultError

from lab.control import live
from .source import Source

BUDGET = 0.08  # s of model feeding per redraw while catching up
READ = 1 << 16


class AttachedLab(Source):
    remote = True

    def __init__(self, info: dict, *, control: bool = True):
        """info: the lab's, as live.pick_lab gives it; control: whether the chaos keys act."""
        super().__init__(1.0)
        self.info = info
        self.control = control
        self.mode = f"{info.get('mode', '?')} lab {info['pid']}" + ("" if control else " · view only")
        self.pending: list[dict] = []
        self.received = 0  # records read from the stream
        self.fed = 0  # of which fed to the model
        self.closed: str | None = None  # why the stream ended: "eof" or the error
        self.gone: str | None = None  # what the screen says once the stream has ended and been fed
        self._reader: asyncio.Task | None = None
        self._writer: asyncio.StreamWriter | None = None

    @property
    def live(self) -> bool:  # chaos keys: with control, while the lab is there
        return self.control and self.gone is None

    async def start(self) -> None:
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        """Every record the lab sends, into `pending`; how the stream ended, into `closed`."""
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=64 * 2**20)
        try:
            reader, self._writer = await asyncio.open_unix_connection(self.info["events"], limit=READ)
            while data := await reader.read(READ):
                unpacker.feed(data)
                for record in unpacker:
                    if isinstance(record, dict):
                        self.pending.append(record)
                        self.received += 1
            self.closed = "eof"
        except asyncio.CancelledError:
            self.closed = "left"
            raise
        except Exception as e:  # the lab went, sent garbage, or a bug here: the screen says why, not freeze
            self.closed = f"{type(e).__name__}: {e}"

    def tick(self) -> None:
        pending = self.pending
        if pending:
            deadline = time.monotonic() + BUDGET
            done = 0
            model = self.model
            while done < len(pending):
                model.feed(pending[done])
                done += 1
                if done % 256 == 0 and time.monotonic() > deadline:
                    break
            del pending[:done]
            self.fed += done
            if speed := self.model.run.get("speed"):
                self.speed = speed
        if self.closed is not None and not self.pending and self.gone is None and self.closed != "left":
            self.gone = self._why_gone()

    def _why_gone(self) -> str:
        if self.model.ended:
            return "the lab ended"
        pid = self.info["pid"]
        try:
            os.kill(pid, 0)
        except OSError:
            return f"the lab (pid {pid}) is gone: it stopped without ending its run"
        if self.closed != "eof":
            return f"lost the lab's stream: {self.closed}"
        return f"the lab (pid {pid}) dropped this view: it fell behind; `nslab attach` again"

    @property
    def catching_up(self) -> float | None:
        """How far the model is with what has come so far (0-1), while more than a redraw's worth waits."""
        if len(self.pending) < 2000:
            return None
        return self.fed / max(1, self.received)

    @property
    def state(self) -> str | None:
        if self.gone is not None:
            return "ended" if self.model.ended else "lab gone"
        if self.catching_up is not None:
            return f"catching up {self.catching_up:.0%}"
        return None

    async def apply(self, words: list[str]) -> str:
        """A chaos action through the lab's control socket: what happened, or FaultError why not."""
        if not self.live:
            raise FaultError("this view only watches" if not self.control else self.gone)
        try:
            reply = await asyncio.to_thread(live.send, words, self.info)
        except OSError as e:
            raise FaultError(f"the lab did not answer: {e}") from None
        if not reply.get("ok"):
            raise FaultError(reply.get("message", "the lab refused"))
        return reply["message"]

    async def stop(self) -> None:
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()
            try:
                await self._reader
            except asyncio.CancelledError:
                pass
        if self._writer is not None:
            self._writer.close()
            self._writer = None

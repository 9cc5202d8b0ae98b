"""What the TUI asks of the Python process it shares with the cluster, while it runs: full garbage
collections at moments the screen picks, and a short GIL switch interval.

Full collections. With 3 NameServers × 1,000 topics the process tracks ~600,000 objects (8,000
long-polled pulls with their tasks, routes, the model), and a quarter of them turns over every
second or so. CPython starts a full collection each time a quarter has been promoted since the
last — about once a second here — and each took 300-450 ms on the one thread that runs trio's
batches and draws the screen: keys waited behind it. So the young generations stay CPython's (a
few ms each) and the full ones are the refresh timer's: once the keys have been left alone QUIET
seconds, at most every EVERY seconds, and at least every AT_MOST seconds whatever happens. The lab
makes little cyclic garbage (~1,000 objects a second), so waiting costs little memory.

The switch interval. Textual reads keys and writes the screen in threads of its own, and each
needs the GIL back after every system call; while trio's batches keep the main thread busy, each
handover waited up to the default 5 ms, several times per key (10-50 ms, at worst 120 ms, between a
key reaching the terminal and the app hearing of it). SWITCH makes each wait at most 1 ms; it only
costs anything while another thread is waiting for the GIL.
"""

from __future__ import annotations

import gc
import sys
import time
from typing import Callable

EVERY = 30.0
QUIET = 2.0
AT_MOST = 120.0
NEVER = 2**31 - 1  # a gen-2 threshold CPython never reaches
SWITCH = 0.001  # seconds


class Responsive:
    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.last = 0.0  # when the last full collection ran
        self.input_at: float | None = None
        self._saved: tuple[tuple[int, int, int], float] | None = None  # CPython's, while we hold them

    @property
    def active(self) -> bool:
        return self._saved is not None

    def start(self) -> None:
        if self.active:
            return
        self._saved = gc.get_threshold(), sys.getswitchinterval()
        gc.set_threshold(self._saved[0][0], self._saved[0][1], NEVER)
        sys.setswitchinterval(SWITCH)
        self.last = self.clock()

    def stop(self) -> None:
        if self.active:
            thresholds, switch = self._saved
            gc.set_threshold(*thresholds)
            sys.setswitchinterval(switch)
            self._saved = None

    def pressed(self) -> None:
        self.input_at = self.clock()

    def tick(self) -> bool:
        """From the refresh timer: run a full collection if it is time. True if one ran."""
        if not self.active:
            return False
        now = self.clock()
        quiet = self.input_at is None or now - self.input_at >= QUIET
        if (quiet and now - self.last >= EVERY) or now - self.last >= AT_MOST:
            gc.collect()
            self.last = self.clock()
            return True
        return False

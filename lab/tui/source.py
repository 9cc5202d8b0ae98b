"""What feeds the screen — the live cluster (guest.py) or a recorded log (replay.py) — and the
time controls both share: pause, a speed ladder, steps."""

from __future__ import annotations

from .model import LabModel

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
STEP = 1.0  # seconds of run time per step


class Source:
    live = False  # chaos actions reach a running cluster
    can_step = False
    mode = ""
    scenario: str | None = None  # the scenario being played, if any
    remote = False  # the lab runs in another process (attach.py): its clock is its own, quitting leaves it
    gone: str | None = None  # why nothing more will come, said once on screen: the screen stays to be read

    def __init__(self, speed: float):
        self.model = LabModel()
        self.speed = speed
        self.paused = False

    @property
    def state(self) -> str | None:
        """The header's word for the run when it is not simply running or paused."""
        return None

    @property
    def rate(self) -> float:
        return 0.0 if self.paused else self.speed

    def toggle_pause(self) -> None:
        self.paused = not self.paused
        self._rate_changed()

    def faster(self) -> None:
        self.speed = next((s for s in SPEEDS if s > self.speed), self.speed)
        self._rate_changed()

    def slower(self) -> None:
        self.speed = next((s for s in reversed(SPEEDS) if s < self.speed), self.speed)
        self._rate_changed()

    def _rate_changed(self) -> None:
        pass

    def step(self, seconds: float = STEP) -> None:
        raise NotImplementedError

    def tick(self) -> None:
        """Bring the model up to date; the screen's timer calls this before every redraw."""

    def hold(self) -> None:
        """A key was pressed: whatever shares the screen's thread lets the screen answer first."""

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    @property
    def error(self) -> BaseException | None:
        return None

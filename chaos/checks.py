"""Expectations checked over the event stream while a run goes — a steady-state hypothesis under
fault, as Chaos Toolkit puts it — not only at the end.

A Check sees every record (`observe`), is told when time passes (`tick`) and when the run ends
(`finish`). It decides once: ok, failed, or could not be judged (what it checks never happened: no
fault to time a removal from, no message in its window) — with a detail a person can act on. A
failed check stays failed. The verdict is Jepsen's: valid when every check held, invalid when one
failed, unknown when none failed but one could not be judged.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Result:
    name: str
    ok: bool | None  # None: could not be judged
    detail: str
    decided_at: float | None = None

    @property
    def status(self) -> str:
        return {True: "ok", False: "failed", None: "unjudged"}[self.ok]

    @property
    def mark(self) -> str:
        """Four columns, for a line per result."""
        return {True: "ok  ", False: "FAIL", None: "??  "}[self.ok]

    def to_dict(self) -> dict:
        return {"name": self.name, "ok": self.ok, "status": self.status, "detail": self.detail}


class Check:
    def __init__(self, name: str):
        self.name = name
        self.result: Result | None = None

    @property
    def decided(self) -> bool:
        return self.result is not None

    def succeed(self, detail: str, now: float | None = None) -> None:
        if self.result is None:
            self.result = Result(self.name, True, detail, now)

    def fail(self, detail: str, now: float | None = None) -> None:
        if self.result is None or self.result.ok is not False:
            self.result = Result(self.name, False, detail, now)

    def unjudged(self, detail: str, now: float | None = None) -> None:
        """What the check looks at never happened: neither a pass nor a failure."""
        if self.result is None:
            self.result = Result(self.name, None, f"could not be judged: {detail}", now)

    # Subclasses override what they need.
    def observe(self, record: dict) -> None:
        pass

    def tick(self, now: float) -> None:
        pass

    def finish(self, now: float) -> None:
        if self.result is None:
            self.fail("never decided", now)


class Checker:
    """Feeds records and time to every check; reports decisions as they happen."""

    def __init__(self, checks: list[Check], on_decided=None):
        self.checks = checks
        self.on_decided = on_decided
        self._reported: set[tuple[int, bool]] = set()

    def observe(self, record: dict) -> None:
        for check in self.checks:
            if check.result is None or check.result.ok is not False:  # a passed check may still be violated
                check.observe(record)
        self._report()

    def tick(self, now: float) -> None:
        for check in self.checks:
            check.tick(now)
        self._report()

    def finish(self, now: float) -> list[Result]:
        for check in self.checks:
            check.finish(now)
        self._report()
        return [check.result for check in self.checks]

    @property
    def valid(self) -> bool | None:
        return verdict([c.result for c in self.checks])

    def _report(self) -> None:
        for i, check in enumerate(self.checks):
            key = (i, check.result.ok) if check.result else None
            if key is not None and key not in self._reported:
                self._reported.add(key)
                if self.on_decided is not None:
                    self.on_decided(check.result)


def verdict(results: list[Result | None]) -> bool | None:
    """Valid (True) when every check held, invalid (False) when one failed, else unknown (None)."""
    if any(r is not None and r.ok is False for r in results):
        return False
    if any(r is None or r.ok is None for r in results):
        return None
    return True

"""The learner's code runs in a process of its own: what it does there cannot reach the verdict,
and a hang, a flood or an exit is reported as the learner's, once, without ending the check."""

import os
import subprocess
import sys
from pathlib import Path

import trio
import trio.testing

from lab.workshop import check as checking
from lab.workshop import remote
from lab.workshop.course import get

NSLAB = str(Path(sys.executable).with_name("nslab"))


def test_exiting_on_import_cannot_print_the_verdict(tmp_path):
    cheat = tmp_path / "mine.py"
    cheat.write_text("import os, sys\nprint('exercise 11: PASSED')\nsys.stdout.flush()\nos._exit(0)\n")
    result = subprocess.run([NSLAB, "workshop", "check", "11", "--file", str(cheat)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "exercise 11: PASSED" not in result.stdout.splitlines(), result.stdout
    assert "your code ended its process (exit code 0)" in result.stderr
    assert "your code printed: exercise 11: PASSED" in result.stderr


def _check_11(tmp_path, body: str) -> tuple[checking.Outcome, str]:
    mine = tmp_path / "mine.py"
    mine.write_text(get(11).solution.read_text() + body)
    lines: list[str] = []
    outcome = checking.check(get(11), file=mine, say=lines.append, scenarios_too=False)
    return outcome, "\n".join(lines)


def test_a_hang_is_bounded_and_said_once(tmp_path, monkeypatch):
    monkeypatch.setattr(remote, "CALL_TIMEOUT", 1.0)
    outcome, output = _check_11(tmp_path, "\nNamesrvSelector.update_addr_list = lambda self, addrs: exec('while True: pass')\n")
    assert not outcome.ok
    assert "did not answer within 1 s" in output, output
    assert output.count("your code's process") == 1, output


def test_an_answer_too_big_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(remote, "MAX_ANSWER", 1 << 16)
    outcome, output = _check_11(tmp_path, "\nNamesrvSelector.is_sticky = lambda self, ok: 'x' * (1 << 20)\n")
    assert not outcome.ok
    assert "more than the 65,536 bytes one answer may take" in output, output


def test_exiting_in_a_method_is_the_learners_error(tmp_path):
    outcome, output = _check_11(tmp_path, "\nimport os\nNamesrvSelector.is_sticky = lambda self, ok: os._exit(3)\n")
    assert not outcome.ok and outcome.failed_tests
    assert "your code ended its process (exit code 3)" in output, output
    assert "exercise 11: NOT YET" in output


def test_an_answer_cannot_run_code_in_the_checker(tmp_path):
    payload = ("\nimport os\nclass Evil:\n    def __reduce__(self):\n        return (os.system, ('echo pwned',))\n"
               "NamesrvSelector.is_sticky = lambda self, ok: Evil()\n")
    outcome, output = _check_11(tmp_path, payload)
    assert not outcome.ok
    assert "return plain data" in output, output


class Counter:
    def __init__(self, index: int):
        self.index = index

    def increment_and_get(self) -> int:
        self.index += 1
        return self.index


def test_the_checkers_objects_work_in_the_learners_process(tmp_path):
    """Exercise 6's index is the client's own object: the learner's code calls its methods there."""
    mine = tmp_path / "mine.py"
    mine.write_text("def pick(index, n):\n    return [index.increment_and_get() for _ in range(n)]\n"
                    "def missing(index):\n    return index.no_such_method()\n")
    function, child = remote.load(mine, "pick", "lab.clients.selection:select_one_message_queue")
    try:
        index = Counter(5)
        assert function(index, 3) == [6, 7, 8] and index.increment_and_get() == 9
    finally:
        child.close()
    broken, child = remote.load(mine, "missing", "lab.clients.selection:select_one_message_queue")
    try:
        try:
            broken(Counter(0))
        except AttributeError as e:  # raised in the learner's code, with their frame
            assert "no_such_method" in str(e) and "mine.py" in e.learner_traceback[3]
        else:
            raise AssertionError("a missing method of the checker's object raises in the learner's code")
    finally:
        child.close()


def test_setting_a_field_of_a_record_is_explained_as_immutable(tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text("from lab.workshop.interfaces import RegisterBrokerResult\n"
                    "def f():\n    result = RegisterBrokerResult()\n    result.first = True\n")
    function, child = remote.load(mine, "f", "nameserver.routes:expired_brokers")
    try:
        function()
    except AttributeError as e:
        assert "immutable" in str(e) and "_replace" in str(e), str(e)
    else:
        raise AssertionError("setting a field of a NamedTuple raises")
    finally:
        child.close()


COROUTINES = '''
import os
import trio
from lab.workshop.interfaces import RemotingError


class BrokerOuterAPI:
    def __init__(self, channels, names):
        self.channels, self.names = channels, names

    async def where(self):
        return os.getpid()

    async def nap(self, seconds):
        start = trio.current_time()
        await trio.sleep(seconds)
        return start, trio.current_time()

    async def ask_all(self, timeout):
        answers = {}

        async def one(name):
            with trio.move_on_after(timeout):
                try:
                    answers[name] = await self.channels.invoke(name)
                except RemotingError as e:
                    answers[name] = f"failed: {e}"

        async with trio.open_nursery() as nursery:
            for name in self.names:
                nursery.start_soon(one, name)
        return answers
'''


class FakeChannels:
    def __init__(self):
        self.cancelled = []

    async def invoke(self, name):
        from nameserver.client import RemotingError
        if name == "refuses":
            raise RemotingError("refused")
        try:
            await trio.sleep(1.0 if name == "quick" else 100.0)
        except trio.Cancelled:
            self.cancelled.append((name, trio.current_time()))
            raise
        return f"{name} at {trio.current_time():g}"


def test_coroutines_run_in_the_learners_process_in_the_checkers_time(tmp_path):
    """Exercise 12's coroutines: another process, whose clock is the checker's virtual one; the
    lab's coroutines they await run in the lab, and what those raise is raised in the learner's code."""
    mine = tmp_path / "mine.py"
    mine.write_text(COROUTINES)
    cls, child = remote.load(mine, "BrokerOuterAPI", "lab.broker.server:BrokerOuterAPI")
    channels = FakeChannels()
    got = {}

    async def main():
        api = cls(channels, ["quick", "refuses", "hangs"])
        got["pid"] = await api.where()
        got["nap"] = await api.nap(5.0)
        got["now"] = trio.current_time()
        got["all"] = await api.ask_all(3.0)
        got["end"] = trio.current_time()

    try:
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    finally:
        child.close()
    assert got["pid"] != os.getpid()
    assert got["nap"] == (0.0, 5.0) and got["now"] == 5.0
    # at once: the quick one answers at 6, the hung one is given up by the learner's own timeout at 8
    assert got["all"] == {"quick": "quick at 6", "refuses": "failed: refused"}, got["all"]
    assert got["end"] == 8.0 and channels.cancelled == [("hangs", 8.0)], (got, channels.cancelled)


def test_a_tests_own_error_is_not_blamed_on_the_learner():
    """A test that trips over its own code says so, with its frame, and never 'your code raised'."""
    import dataclasses

    def test_reads_past_the_end(failover_order):
        return failover_order(["a", "b", "c"], 0)[7]  # the test's own IndexError

    exercise = dataclasses.replace(get(7), tests=[test_reads_past_the_end])
    lines: list[str] = []
    outcome = checking.check(exercise, solution=True, say=lines.append, scenarios_too=False)
    output = "\n".join(lines)
    assert not outcome.ok
    assert "the check itself raised IndexError" in output and "test_isolation.py" in output, output
    assert "your code raised" not in output, output

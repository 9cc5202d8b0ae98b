"""lab/remoting/flow.py: one coroutine, run by a task or by its steps' callbacks."""

from __future__ import annotations

import pytest
import trio

from lab.remoting.flow import Flow, Step, in_task, run


class Replies:
    """Steps answered later, by hand, as a connection's reply callbacks answer them."""

    def __init__(self) -> None:
        self.waiting: list = []  # the resume callbacks of the steps begun and not answered

    def step(self, answer_in_task: object = "from a task") -> Step:
        async def in_task():
            await trio.sleep(0)
            return answer_in_task
        return Step(self.waiting.append, in_task)

    def answer(self, outcome: object) -> None:
        self.waiting.pop(0)(outcome)


def run_flow(coro) -> list:
    done: list = []
    Flow(coro, lambda value, error: done.append((value, error))).start()
    return done


def test_a_flow_waits_at_each_step_until_its_callback_answers_and_returns_its_value():
    replies = Replies()

    async def flow():
        first = await replies.step()
        second = await replies.step()
        return first + second

    done = run_flow(flow())
    assert done == [] and len(replies.waiting) == 1  # waiting at the first step
    replies.answer(1)
    assert done == [] and len(replies.waiting) == 1
    replies.answer(2)
    assert done == [(3, None)]


def test_an_exception_answered_is_raised_at_the_await_and_can_be_caught_there():
    replies = Replies()

    async def flow():
        try:
            await replies.step()
        except KeyError as error:
            return f"caught {error}"

    done = run_flow(flow())
    replies.answer(KeyError("x"))
    assert done == [("caught 'x'", None)]


def test_what_a_flow_raises_goes_to_done_not_to_the_caller():
    replies = Replies()

    async def flow():
        await replies.step()
        raise ValueError("a bug in the flow")

    done = run_flow(flow())
    replies.answer(None)
    assert done[0][0] is None and isinstance(done[0][1], ValueError)


def test_steps_answered_while_they_start_go_on_in_a_loop_not_a_deeper_stack():
    async def flow():
        total = 0
        for i in range(20_000):  # far past the recursion limit, were each answer a nested call
            total += await Step(lambda resume, i=i: resume(i), None)
        return total

    assert run_flow(flow()) == [(sum(range(20_000)), None)]


def test_a_step_that_cannot_begin_raises_at_its_await():
    def start(resume):
        raise ConnectionError("no channel")

    async def flow():
        try:
            await Step(start, None)
        except ConnectionError as error:
            return str(error)

    assert run_flow(flow()) == [("no channel", None)]


def test_a_flow_given_up_runs_its_finally_and_ignores_a_late_answer():
    replies = Replies()
    cleaned = []

    async def flow():
        try:
            await replies.step()
            cleaned.append("went on")  # never: the answer comes after it was given up
        finally:
            cleaned.append("finally")

    done: list = []
    flow_ = Flow(flow(), lambda value, error: done.append((value, error))).start()
    flow_.give_up()
    replies.answer("late")
    assert cleaned == ["finally"] and done == []


async def test_a_flow_that_awaits_a_task_only_wait_fails_saying_so(autojump_clock):
    async def sleeping():
        await trio.sleep(1)

    done = run_flow(sleeping())
    assert isinstance(done[0][1], TypeError) and "in_task" in str(done[0][1])


async def test_the_same_coroutine_awaited_by_a_task_waits_as_a_task_does(autojump_clock):
    replies = Replies()

    async def flow():
        return [await replies.step("a"), await replies.step("b")]

    assert await flow() == ["a", "b"]  # each step's task-side wait; no callback involved
    assert replies.waiting == []


async def test_in_task_runs_a_tasks_wait_for_a_flow_and_resumes_it_with_the_result(autojump_clock):
    async def slow_double(x):
        await trio.sleep(5)
        return 2 * x

    async def failing():
        await trio.sleep(1)
        raise LookupError("gone")

    async with trio.open_nursery() as nursery:
        async def flow():
            doubled = await in_task(nursery, slow_double, 21)
            with pytest.raises(LookupError):
                await in_task(nursery, failing)
            return doubled

        done = run_flow(flow())
        assert done == []
        await trio.sleep(10)
        assert done == [(42, None)]
        assert trio.current_time() == pytest.approx(10)


async def test_run_awaits_a_flow_from_a_task_and_a_cancelled_run_gives_it_up(autojump_clock):
    replies = Replies()
    cleaned = []

    async def flow():
        try:
            return await replies.step() + await replies.step()
        finally:
            cleaned.append("finally")

    async with trio.open_nursery() as nursery:
        results = []

        async def runner():
            results.append(await run(flow()))
        nursery.start_soon(runner)
        await trio.sleep(1)
        replies.answer(2)
        replies.answer(3)
        await trio.sleep(1)
    assert results == [5] and cleaned == ["finally"]

    with trio.move_on_after(1):
        await run(flow())  # never answered: cancelled after 1 s
    assert cleaned == ["finally", "finally"]
    replies.answer("late")  # dropped, as an abandoned call's reply


async def test_run_raises_what_the_flow_raised(autojump_clock):
    async def flow():
        await Step(lambda resume: resume(OSError("refused")), None)

    with pytest.raises(OSError, match="refused"):
        await run(flow())

"""Bad files and values a careless user gives the lab: each is one line on stderr naming the file
(and line) or the flag, the key, the value and what is accepted — within seconds, never a traceback
or a spin. And Ctrl-C or SIGTERM ends the lab whatever it is doing, start-up included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos.faults import FaultError, REQUEST_PARAMS, TOXIC_PARAMS
from lab.control.actions import vocabulary
from lab.run.fake_data import topic_names

NSLAB = str(Path(sys.executable).with_name("nslab"))
PROMPT = 20  # seconds: far more than a refusal takes, far less than the spins these were


def nslab(*args: str, timeout: float = PROMPT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def refused(result: subprocess.CompletedProcess, line: str) -> None:
    assert (result.returncode, result.stderr) == (2, line + "\n"), result.stderr


# --- topic names (the values' ranges: tests/lab/test_config_validation.py) -------------------------------

def test_topic_names_are_drawn_in_linear_time_and_stay_the_same_for_a_seed():
    began = time.monotonic()
    names = topic_names(50_000, seed=3)
    assert time.monotonic() - began < 5  # a list's `in` made this minutes
    assert len(set(names)) == 50_000 and all(n.startswith("Topic") and n.isalnum() for n in names)
    # the names the quadratic version drew: a seed's run stays the run it was
    assert topic_names(4, seed=3) == names[:4] == ["TopicDrawName", "TopicHavePage", "TopicPersonalAssume",
                                                   "TopicActuallyStudy"]


# --- toxic and fault parameters -----------------------------------------------------------------

def test_a_toxic_key_it_does_not_take_is_refused_naming_the_ones_it_does():
    with pytest.raises(FaultError) as error:
        vocabulary().parse_words(["toxic", "broker-a-0", "loss", "loss=0.5"])  # it silently applied 10 %
    assert str(error.value) == "loss: a loss toxic has no parameter 'loss' (it takes probability)"
    with pytest.raises(FaultError, match=r"^toxic loss: unexpected '0.5' \(parameters are key=value: probability=\)$"):
        vocabulary().parse_words(["toxic", "broker-a-0", "loss", "0.5"])


@pytest.mark.parametrize("kind", [*TOXIC_PARAMS, *REQUEST_PARAMS])
def test_every_toxic_kind_refuses_an_unknown_key_from_words_and_from_a_scenario(kind):
    accepted = {**TOXIC_PARAMS, **REQUEST_PARAMS}[kind]
    line = f"colour: a {kind} toxic has no parameter 'colour' (it takes {', '.join(accepted) or 'none'})"
    with pytest.raises(FaultError) as error:
        vocabulary().parse_words(["toxic", "ns-0", kind, "colour=red"])
    assert str(error.value) == line
    with pytest.raises(FaultError) as error:
        vocabulary().parse_table({"fault": "toxic", "node": "ns-0", "kind": kind, "colour": "red"})
    assert str(error.value) == line


@pytest.mark.parametrize("words, message", [
    (["kill", "broker-a-0", "force=1"], "force: kill has no parameter 'force' (it takes none)"),
    (["grow-topics", "broker-a-0", "size=10"], "size: grow-topics has no parameter 'size' (it takes count)"),
    (["toxic", "ns-0", "latency", "latency=99999999999999h"], "latency: 3.6e+17s is out of range 0..86400s"),
    (["toxic", "ns-0", "loss", "probability=2"], "probability: 2 is out of range 0..1"),
    (["toxic", "ns-0", "drop", "code=REGISTER_BROKER", "count=0"],
     "count: 0 is out of range 1..1000000000 (a whole number)"),
])
def test_fault_parameters_are_checked_by_name_and_range(words, message):
    with pytest.raises(FaultError) as error:
        vocabulary().parse_words(words)
    assert str(error.value) == message


def test_grow_topics_is_bounded_before_it_is_applied():
    from lab.control.actions import validate
    fault = vocabulary().parse_words(["grow-topics", "broker-a-0", "count=100000000"])  # was a MemoryError
    with pytest.raises(FaultError) as error:
        validate(fault, {"broker-a-0": "broker"}, {"broker-a"})
    assert str(error.value) == "grow-topics: count must be a whole number within 1..100000, not '100000000'"


# --- bad scenario and config files ----------------------------------------------------------------

HEADER = '[scenario]\nteaches = "x"\nduration = "1m"\n'


@pytest.mark.parametrize("name, content, why", [
    ("latin1.toml", (HEADER + '# caf\xe9\n').encode("latin-1"),  # was a UnicodeDecodeError traceback
     "{path}:4: not UTF-8 text: byte 0xe9 at column 6 (save the file as UTF-8)"),
    ("long.toml", HEADER.replace('"1m"', '"99999999999999h"').encode(),
     "{path}:3: [scenario] duration: 3.6e+17s is out of range 0..604800s (a week)"),
    ("loss.toml", (HEADER + '\n[[timeline]]\nat = "1s"\nfault = "toxic"\nnode = "broker-a-0"\nkind = "loss"\n'
                   'loss = 0.5\n').encode(),
     "{path}:10: [[timeline]] #1 loss: a loss toxic has no parameter 'loss' (it takes probability)"),
    ("deep.toml", b"a = " + b"[" * 100_000 + b"\n",  # was a RecursionError traceback
     "{path}: not valid TOML: arrays or tables nested too deeply"),
    ("huge.toml", b"#" * (2 << 20) + b"\n", "{path}: too large: over 1,048,576 bytes (a TOML file of settings is a few KB)"),
    ("types.toml", (HEADER + '\n[cluster]\nnameservers = "two"\n').encode(),
     "{path}:6: [cluster] nameservers: cluster.nameservers: expected a whole number, got 'two'"),
    ("spread.toml", (HEADER + '\n[[timeline]]\nat = "1s"\nspread = "999h"\nfault = "kill"\nnode = "ns-0"\n').encode(),
     "{path}:7: [[timeline]] #1 spread: 3.5964e+06s is out of range 0..60s (the scenario's duration)"),
], ids=lambda value: value if isinstance(value, str) and value.endswith(".toml") else "")
def test_a_bad_scenario_file_is_one_line_naming_file_line_and_what_is_wrong(tmp_path, name, content, why):
    """(Each case is named by its file: the content would make a path too long.)"""
    path = tmp_path / name
    path.write_bytes(content)
    refused(nslab("run", str(path)), "nslab run: " + why.format(path=path))


def test_a_directory_or_an_unreadable_file_is_one_line_too(tmp_path):
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    refused(nslab("run", str(folder)), f"nslab run: {folder}: cannot read: Is a directory")
    refused(nslab("up", "--headless", "--config", str(folder)), f"nslab up: {folder}: cannot read: Is a directory")
    if os.geteuid() == 0:
        pytest.skip("root reads a file of mode 000: the unreadable case needs another user")
    secret = tmp_path / "secret.toml"
    secret.write_text(HEADER)
    secret.chmod(0)
    refused(nslab("run", str(secret)), f"nslab run: {secret}: cannot read: Permission denied")


def test_a_config_file_that_is_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "lab.toml"
    path.write_bytes(b"[cluster]\nclusterName = \"caf\xe9\"\n")
    refused(nslab("up", "--headless", "--config", str(path)),
            f"nslab up: {path}:2: not UTF-8 text: byte 0xe9 at column 19 (save the file as UTF-8)")


@pytest.mark.parametrize("option, why", [
    # an eleven-thousand-year run was taken, and made trio's deadlines deaf to a first Ctrl-C
    (["--duration", "99999999999999h"], "argument --duration: '99999999999999h' is out of range: more than 0, "
                                        "at most 604800s (a week)"),
    (["--speed", "0"], "argument --speed: '0' is out of range 0.01..1000"),  # the clock stood still for good
    (["--speed", "nan"], "argument --speed: 'nan' is out of range 0.01..1000"),  # a traceback
])
def test_a_run_option_out_of_range_is_refused(option, why):
    result = nslab("up", "--headless", "--sim", *option)
    assert result.returncode == 2 and result.stderr.splitlines()[-1] == f"nslab up: error: {why}", result.stderr


# --- signals ----------------------------------------------------------------------------------------

# Large but valid: its start-up (every client fetching 20,000 routes) takes tens of seconds.
LARGE = ["cluster.topics=20000"]


@pytest.mark.parametrize("mode", ["--sim", "--sockets"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_start_up_ends_the_lab_within_seconds(signum, mode, tmp_path):
    """Before, the signal waited for every node to be up: 16-26 s here, minutes for more topics."""
    args = [sys.executable, "-m", "lab.cli", "up", "--headless", *(["--sim"] if mode == "--sim" else []),
            "--events", str(tmp_path / "run.events"), *[a for s in LARGE for a in ("--set", s)]]
    lab = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(4)  # imports done, the cluster starting
        assert lab.poll() is None, lab.communicate()
        lab.send_signal(signum)
        sent = time.monotonic()
        out, err = lab.communicate(timeout=30)
        waited = time.monotonic() - sent
    finally:
        if lab.poll() is None:
            lab.kill()
            lab.wait()
    assert "every node up" not in out, "the start-up finished first: make the cluster larger"
    assert waited < 5, f"took {waited:.1f} s to stop"
    assert lab.returncode == 0 and "Traceback" not in err
    assert err == (f"stopped by {signal.Signals(signum).name} before every node was up: "
                   f"{tmp_path / 'run.events'} ends there, without run.end\n")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_a_scenario_run_unjudged_within_seconds(signum, tmp_path):
    """Before, SIGINT was not heard until the run had ended (and judged it VALID), and SIGTERM killed
    it where it stood (exit 143, the log never closed)."""
    lab = subprocess.Popen([sys.executable, "-m", "lab.cli", "run", "large-cluster-broker-crash",
                            "--events", str(tmp_path / "run.events")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The signal goes as soon as the run says it has begun: a quiet machine runs this scenario
        # to its end in about 5 s, so a fixed wait could miss it.
        first = lab.stdout.readline()
        time.sleep(0.5)
        assert lab.poll() is None, lab.communicate()
        lab.send_signal(signum)
        sent = time.monotonic()
        out, err = lab.communicate(timeout=60)
        out = first + out
        waited = time.monotonic() - sent
    finally:
        if lab.poll() is None:
            lab.kill()
            lab.wait()
    assert waited < 5, f"took {waited:.1f} s to stop"
    assert lab.returncode == 2 and err == "", err  # 2: the run could not be judged
    assert f"the run could not be judged: interrupted by {signal.Signals(signum).name}" in out
    assert out.splitlines()[-1].startswith("UNKNOWN: 0/")

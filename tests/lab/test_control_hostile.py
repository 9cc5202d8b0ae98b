"""No client of the control socket stops or stalls a running lab, and no other local user can stand
in for it (issue 34, items 1-3): over the real Unix socket of a real `nslab up --headless`, and as
another user (uid 65534) where one is needed — those skip, saying so, when the suite is not root."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from lab import cli
from lab.control import live
from other_user import OTHER, run_as_other_user, start_as_other_user

NSLAB = str(Path(sys.executable).with_name("nslab"))
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="acting as another user (uid 65534) needs root: run the suite as root")


def ask(path: str, payload: bytes, timeout: float = 10.0) -> tuple[dict | None, bytes]:
    """Send raw bytes, read until the lab closes: (the reply line parsed, anything after it)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        sock.sendall(payload)
        data = b""
        try:
            while chunk := sock.recv(65536):
                data += chunk
        except ConnectionResetError:  # closed with some of our bytes unread: its reply came first
            assert data
    line, _, rest = data.partition(b"\n")
    return (json.loads(line) if line else None), rest


def status(path: str) -> dict:
    reply, _ = ask(path, b'{"words": ["status"]}\n')
    assert reply is not None and reply["ok"], reply
    return reply


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A running lab of our own: (process, its control socket, its info file, its stderr file)."""
    home = tmp_path_factory.mktemp("runtime")
    env = {**os.environ, "XDG_RUNTIME_DIR": str(home)}
    err = home / "lab.stderr"
    with open(err, "w") as stderr:
        proc = subprocess.Popen([NSLAB, "up", "--headless", "--duration", "10m"], stdout=subprocess.DEVNULL,
                                stderr=stderr, env=env)
    try:
        info_path = home / "nslab" / f"{proc.pid}.json"
        deadline = time.monotonic() + 60
        while not (info_path.exists() and "namesrv_addr" in json.loads(info_path.read_text() or "{}")):
            assert proc.poll() is None, err.read_text()
            assert time.monotonic() < deadline, "the lab never started"
            time.sleep(0.1)
        yield proc, json.loads(info_path.read_text())["socket"], info_path, err
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def alive(lab) -> None:
    proc, path, _, err = lab
    assert proc.poll() is None, f"the lab ended (exit {proc.returncode}):\n{err.read_text()[-3000:]}"
    assert status(path)["status"], "and it answers the next client"
    assert "Traceback" not in err.read_text()


# --- 1. a client that leaves before its answer ---------------------------------------------------

def test_clients_that_leave_before_their_answer_cost_the_lab_nothing(lab):
    _, path, _, _ = lab
    for _ in range(30):  # Ctrl-C on `nslab chaos status`: the request is sent, the client gone
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(path)
            sock.sendall(b'{"words": ["status"]}\n')
    time.sleep(0.5)
    alive(lab)
    for _ in range(10):  # `nslab chaos status | head -1`
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(path)
            sock.sendall(b'{"words": ["status"]}\n')
            assert sock.recv(10)
    alive(lab)


# --- 2. what a request may be ----------------------------------------------------------------------

@pytest.mark.parametrize("payload, error", [
    (b"[" * 60_000 + b"\n", "bad request: nested 60000 deep"),
    (b'{"words": [["status"]]}\n', "bad request: nested 3 deep"),
    (b'{"words": "status"}\n', 'bad request: "words" is not a list of strings'),
    (b'{"words": ["status"], "as": "root"}\n', 'bad request: not an object with the one key "words"'),
    (b'["status"]\n', 'bad request: not an object with the one key "words"'),
    (b'{"words": []}\n', "bad request: 0 words; a request has 1 to 64"),
    (json.dumps({"words": ["kill"] * 1000}).encode() + b"\n", "bad request: 1000 words; a request has 1 to 64"),
    (json.dumps({"words": ["x" * 5000]}).encode() + b"\n", "bad request: a word longer than 1024 characters"),
    (b'{"words": ["\xff"]}\n', "bad request: not UTF-8"),
    (b"status\n", "bad request: not JSON"),
    (b"x" * 70_000 + b"\n", "bad request: longer than 65536 bytes"),
], ids=["deep", "nested-word", "words-not-list", "extra-key", "not-object", "no-words", "many-words", "long-word",
        "not-utf8", "not-json", "too-long"])
def test_a_bad_request_gets_a_one_line_error_and_its_connection_closed(lab, payload, error):
    _, path, _, _ = lab
    reply, rest = ask(path, payload)
    assert reply is not None and reply["ok"] is False and reply["message"].startswith(error), reply
    assert "\n" not in reply["message"] and rest == b"", "one line, then the connection is closed"
    alive(lab)


@pytest.mark.parametrize("payload", [b"[" * 65_536, b'"' + b'\\"' * 32_000, b'"\\' * 32_768, b'"' * 65_536,
                                     b'{"words": ["' + b"[" * 65_000 + b'"]}'],
                         ids=["brackets", "escaped-quotes", "quote-backslash", "quotes", "brackets-in-a-word"])
def test_no_request_of_the_largest_size_takes_long_to_judge(payload):
    began = time.perf_counter()
    try:
        live.parse_request(payload)
    except live.RequestError:
        pass
    assert time.perf_counter() - began < 0.2


def test_idle_and_half_sent_requests_are_closed_while_others_are_answered(lab):
    _, path, _, _ = lab
    timeout = 5  # the promise: a request line within 5 s of connecting (live.REQUEST_TIMEOUT)
    silent, half = (socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(2))
    try:
        for sock in (silent, half):
            sock.settimeout(timeout + 5)
            sock.connect(path)
        half.sendall(b'{"words": ["sta')
        began = time.monotonic()
        status(path)
        assert time.monotonic() - began < 1.0, "answered at once beside the idle ones"
        for sock in (silent, half):
            data = b""
            while chunk := sock.recv(4096):  # the lab closes it after the timeout
                data += chunk
            assert json.loads(data)["message"] == f"bad request: no full line within {timeout} s"
        waited = time.monotonic() - began
        assert timeout - 1 < waited < timeout + 2, waited
    finally:
        silent.close()
        half.close()
    alive(lab)


def test_a_flood_of_idle_connections_is_bounded_and_never_blocks_a_client(lab):
    _, path, _, _ = lab
    idle = []
    try:
        for _ in range(60):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(path)
            idle.append(sock)
        began = time.monotonic()
        status(path)  # room is made for it by closing an idle one that has said nothing for 0.5 s
        assert time.monotonic() - began < 1.5, "a client that sends at once gets through the idle ones"
        time.sleep(0.5)
        closed = 0
        for sock in idle:
            sock.settimeout(0.01)
            try:
                data = sock.recv(4096)
            except TimeoutError:
                continue
            closed += 1
            assert b"had sent no request for the longest" in data
        assert closed >= 60 - 32, f"only {closed} of 60 idle connections were closed: at most 32 stay open"
    finally:
        for sock in idle:
            sock.close()
    alive(lab)


def test_a_burst_of_clients_at_once_is_answered_every_one(lab):
    """100 `nslab chaos status` at the same moment (a script, a watch loop gone wild): none is
    refused, none closed as idle, none waits long."""
    from concurrent.futures import ThreadPoolExecutor

    _, path, _, _ = lab

    def timed_status(_):
        began = time.monotonic()
        return bool(status(path)["status"]), time.monotonic() - began

    with ThreadPoolExecutor(100) as pool:
        results = list(pool.map(timed_status, range(100)))
    assert all(ok for ok, _ in results)
    assert max(took for _, took in results) < 3.0
    alive(lab)


def test_the_labs_files_are_its_users_only(lab):
    _, path, info_path, _ = lab
    info = json.loads(info_path.read_text())
    for file in (info_path, Path(path), Path(info["events"])):
        mode = stat.S_IMODE(os.lstat(file).st_mode)
        assert mode == 0o600, f"{file.name} has mode {mode:04o}"
    assert stat.S_IMODE(os.lstat(info_path.parent).st_mode) == 0o700


# --- 3. the runtime folder must be the user's own ------------------------------------------------

@pytest.fixture
def tmpdir_only(monkeypatch):
    """No XDG_RUNTIME_DIR: the folder is $TMPDIR/nslab-<uid>, here in a fresh folder that, like /tmp,
    every user may write in (sticky)."""
    base = Path(tempfile.mkdtemp(prefix="nslab-shared-", dir="/tmp"))
    os.chmod(base, 0o1777)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(base))
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    yield base / f"nslab-{os.getuid()}"
    shutil.rmtree(base)


def cli_env(folder: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    return {**env, "TMPDIR": str(folder.parent)}


def run_nslab(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([NSLAB, *args], capture_output=True, text=True, env=cli_env(folder), timeout=60)


def refused_everywhere(folder: Path, problem: str, capsys) -> None:
    """`nslab up` (its own process), `nslab chaos`, `nslab attach`: exit 2, one line naming the
    folder and what is wrong, no traceback."""
    up = run_nslab(folder, "up", "--headless", "--duration", "3s")
    assert up.returncode == 2 and "Traceback" not in up.stderr, up.stderr
    assert up.stderr.count("\n") == 1 and up.stderr.startswith(f"nslab up: the lab's runtime folder {folder} "), up.stderr
    assert problem in up.stderr
    for command in (["chaos", "kill", "broker-a-0"], ["attach"]):
        assert cli.main(command) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith(f"nslab {command[0]}: the lab's runtime folder {folder} ") and problem in err, err


def serve_as_other_user(path: Path) -> subprocess.Popen:
    """A process of uid 65534 listening at `path`, answering every request like a lab that did it."""
    code = ("import socket, sys\n"
            "s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(); print('ready', flush=True)\n"
            "while True:\n"
            "    c, _ = s.accept(); c.recv(65536)\n"
            "    c.sendall(b'{\"ok\": true, \"message\": \"broker-a-0 killed\"}\\n'); c.close()\n")
    proc = start_as_other_user(code, str(path), stdout=subprocess.PIPE)
    assert proc.stdout.readline() == "ready\n"
    return proc


@as_root
def test_another_users_folder_is_refused_and_never_talked_to(tmpdir_only, capsys):
    """They made $TMPDIR/nslab-<uid> first, mode 0777, and put a lab's info and socket in it."""
    folder = tmpdir_only
    folder.mkdir()
    os.chmod(folder, 0o777)
    os.chown(folder, OTHER, OTHER)
    impostor = serve_as_other_user(folder / "1.sock")
    try:
        (folder / "1.json").write_text(json.dumps({"pid": os.getpid(), "socket": str(folder / "1.sock"),
                                                   "events": str(folder / "1.events")}))
        chaos = run_nslab(folder, "chaos", "kill", "broker-a-0")
        assert "broker-a-0 killed" not in chaos.stdout, "the other user's reply was taken for the lab's"
        assert chaos.returncode == 2 and "is owned by uid 65534 (nobody), not by you (uid 0 (root))" in chaos.stderr
        refused_everywhere(folder, "is owned by uid 65534 (nobody), not by you", capsys)
    finally:
        impostor.kill()
        impostor.wait()


@as_root
def test_a_socket_of_another_user_is_not_trusted_even_from_our_own_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    outside = Path(tempfile.mkdtemp(prefix="nslab-other-", dir="/tmp"))
    try:
        os.chmod(outside, 0o777)
        impostor = serve_as_other_user(outside / "lab.sock")
        try:
            (live.runtime_dir() / "1.json").write_text(json.dumps({"pid": os.getpid(), "socket": str(outside / "lab.sock")}))
            assert cli.main(["chaos", "kill", "broker-a-0"]) == 2
            out, err = capsys.readouterr()
            assert "killed" not in out and f"{outside / 'lab.sock'} is served by uid 65534 (nobody), not by you" in err
        finally:
            impostor.kill()
            impostor.wait()
    finally:
        shutil.rmtree(outside)


def test_a_plain_file_in_the_folders_place_is_refused(tmpdir_only, capsys):
    tmpdir_only.write_text("not a folder")
    refused_everywhere(tmpdir_only, "is not a folder: refusing to use it; remove it", capsys)


def test_a_symlink_in_the_folders_place_is_refused_even_to_a_private_folder(tmpdir_only, tmp_path, capsys):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    tmpdir_only.symlink_to(target)
    refused_everywhere(tmpdir_only, "is a symlink: refusing to use it", capsys)


def test_a_folder_of_ours_open_to_others_is_refused_with_the_fix(tmpdir_only, capsys):
    tmpdir_only.mkdir()
    os.chmod(tmpdir_only, 0o777)
    refused_everywhere(tmpdir_only, f"has mode 0777, not 0700 (others could reach its sockets): `chmod 700 {tmpdir_only}`",
                       capsys)
    assert stat.S_IMODE(os.lstat(tmpdir_only).st_mode) == 0o777, "refused, never repaired"


def test_the_same_checks_hold_under_xdg_runtime_dir(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "nslab").mkdir(mode=0o755)
    os.chmod(tmp_path / "nslab", 0o755)
    assert cli.main(["chaos", "status"]) == 2
    assert f"the lab's runtime folder {tmp_path / 'nslab'} has mode 0755, not 0700" in capsys.readouterr().err



@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_ctrl_c_on_nslab_chaos_before_the_answer_says_so_in_one_line(tmp_path, inherited):
    """A lab slow to answer (a restart under way, say): Ctrl-C leaves without a traceback — also
    when nslab chaos was started with SIGINT ignored (a shell's background job; a test suite whose
    process ignored it once), where Python installs no handler of its own."""
    import signal

    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}
    folder = tmp_path / "nslab"
    folder.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as slow:
        slow.bind(str(folder / "1.sock"))
        slow.listen()
        (folder / "1.json").write_text(json.dumps({"pid": os.getpid(), "socket": str(folder / "1.sock")}))
        ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if inherited == "ignored" else None
        client = subprocess.Popen([NSLAB, "chaos", "restart", "broker-a-0"], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, preexec_fn=ignore)
        slow.settimeout(30)
        conn, _ = slow.accept()
        with conn:
            conn.recv(4096)  # the request is in; no answer comes
            client.send_signal(signal.SIGINT)
            out, err = client.communicate(timeout=30)
    assert client.returncode == 130 and "Traceback" not in err, err
    assert err == "nslab chaos: interrupted: the lab may still carry it out (see `nslab chaos status`)\n"


def test_a_runtime_folder_too_long_for_a_socket_is_refused_in_one_line(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(deep)}
    up = subprocess.run([NSLAB, "up", "--headless", "--duration", "3s"], capture_output=True, text=True, env=env,
                        timeout=60)
    assert up.returncode == 2 and "Traceback" not in up.stderr, up.stderr
    assert up.stderr == (f"nslab up: the lab's runtime folder {deep / 'nslab'} is too long a path for its sockets "
                         f"(at most 92 bytes): set XDG_RUNTIME_DIR to a shorter folder\n")


def test_nslab_serve_refuses_a_runtime_folder_not_ours_in_one_line(tmpdir_only):
    tmpdir_only.write_text("not a folder")
    served = run_nslab(tmpdir_only, "serve", "--port", "0")
    assert served.returncode == 2 and "Traceback" not in served.stderr, served.stderr
    assert served.stderr.startswith(f"nslab serve: the lab's runtime folder {tmpdir_only} is not a folder")
    assert served.stderr.count("\n") == 1


@as_root
def test_a_client_of_another_user_is_refused_even_were_the_socket_in_reach(monkeypatch):
    """The folder and socket opened up by hand (chmod): the lab still answers its own user only."""
    import threading

    import trio

    base = Path(tempfile.mkdtemp(prefix="nslab-reach-", dir="/tmp"))
    os.chmod(base, 0o711)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base))
    server = live.ControlServer(None, None, {})
    scope, token, started = trio.CancelScope(), [], threading.Event()

    async def run():
        token.append(trio.lowlevel.current_trio_token())
        with scope:
            async with trio.open_nursery() as nursery:
                await nursery.start(server.serve)
                started.set()

    thread = threading.Thread(target=trio.run, args=(run,))
    thread.start()
    try:
        assert started.wait(10)
        os.chmod(server.socket_path.parent, 0o711)
        os.chmod(server.socket_path, 0o666)
        code = ("import socket, sys\n"
                "s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])\n"
                "print(s.recv(65536).decode())\n")  # the refusal comes before any request
        other = run_as_other_user(code, str(server.socket_path), timeout=30)
        assert other.stdout and json.loads(other.stdout) == {"ok": False, "message": "refused: this lab answers uid 0 (root) only"}, \
            other.stdout + other.stderr
    finally:
        os.chmod(server.socket_path.parent, 0o700)
        trio.from_thread.run_sync(scope.cancel, trio_token=token[0])
        thread.join(10)
        shutil.rmtree(base)

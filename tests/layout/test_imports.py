"""The tree's promises: imports point one way (lab -> nameserver, chaos; never back, and never
between chaos and nameserver), no import cycle between modules (type-only imports aside), and no
module of one role at lab/'s top level."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("nameserver", "chaos", "lab")
SHARED_AT_LAB_TOP = {"lab.cli", "lab.config", "lab.events"}


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if {"exercises", "solutions"} & set(path.parts):
                continue  # workshop files for learners, loaded by path
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `name` imports, anywhere in it but under `if TYPE_CHECKING:`."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    type_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                 for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in known else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


# What each package may not import: the lab uses both others, and they use neither (DESIGN.md §3).
FORBIDDEN = {"nameserver": ("lab", "chaos"), "chaos": ("lab", "nameserver")}


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_nameserver_and_chaos_import_neither_the_lab_nor_each_other():
    wrong = {name: sorted(d for d in deps if any(_in(d, p) for p in FORBIDDEN[package]))
             for name, deps in graph().items() for package in FORBIDDEN if _in(name, package)}
    assert {name: deps for name, deps in wrong.items() if deps} == {}


# Brokers and clients are different nodes: what both need lives in lab/remoting, not in one of them.
SEPARATE_ROLES = ("lab.clients", "lab.broker")


def test_the_client_and_the_broker_roles_import_nothing_of_each_other():
    wrong = {name: sorted(d for d in deps if _in(d, other))
             for name, deps in graph().items()
             for own, other in (SEPARATE_ROLES, SEPARATE_ROLES[::-1]) if _in(name, own)}
    assert {name: deps for name, deps in wrong.items() if deps} == {}


def test_there_is_no_import_cycle():
    edges = graph()
    cycles, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(edges[node]):
            if state.get(nxt) == "open":
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_lab_top_level_holds_only_what_every_part_shares():
    top = {name for name in modules() if name.startswith("lab") and name.count(".") <= 1
           and not (ROOT / name.replace(".", "/")).is_dir()}
    assert top == SHARED_AT_LAB_TOP


# --- the roles never know they are simulated (issue 35) -------------------------------------------
# The simulator lives in lab/sim, which lab/run/cluster.py builds when the run is simulated; a role
# module (the NameServer, the broker, the clients, their remoting) reads as RocketMQ's. Each rule
# below lists what still breaks it, each entry with who is taking it away: an entry that no longer
# offends fails its rule until it is taken off, so the lists only shrink. None may grow.
ROLE_PACKAGES = ("nameserver", "lab/broker", "lab/clients", "lab/remoting")
SECTION = "\"The simulator's aggregation of idle traffic, and what it asks of the roles\""


def role_files() -> dict[str, str]:
    return {str(path.relative_to(ROOT)): path.read_text() for package in ROLE_PACKAGES
            for path in sorted((ROOT / package).rglob("*.py"))}


def _in_a_role(module: str) -> bool:
    return any(_in(module, package.replace("/", ".")) for package in ROLE_PACKAGES)


def check_listed(found: dict[str, set[str]], listed: dict[str, set[str]], what: str) -> None:
    """`found` (file -> offences) against the allowed `listed`: nothing beyond it, nothing it
    lists that is gone."""
    beyond = {f: sorted(o - listed.get(f, set())) for f, o in found.items() if o - listed.get(f, set())}
    assert beyond == {}, f"{what}: it belongs in lab/sim (docs/rocketmq-map.md, {SECTION})"
    gone = {f: sorted(o - found.get(f, set())) for f, o in listed.items() if o - found.get(f, set())}
    assert gone == {}, f"gone from there: take it off the list ({what})"


# Imports of the simulator's package.
SIM_IMPORTS_LEFT: dict[str, set[str]] = {}


def role_imports_of_the_simulator() -> dict[str, set[str]]:
    return {name: {d for d in deps if _in(d, "lab.sim")} for name, deps in graph().items()
            if _in_a_role(name) and any(_in(d, "lab.sim") for d in deps)}


def test_no_role_module_imports_the_simulator_but_what_is_listed_as_left():
    check_listed(role_imports_of_the_simulator(), SIM_IMPORTS_LEFT, "a role imports lab.sim")


# Peeking at what a stream happens to offer (getattr/hasattr on a stream, or on anything's
# .stream) to learn it is simulated: whoever builds a role on the simulated network says so instead.
STREAM_PEEK = re.compile(r"\b(getattr|hasattr)\(\s*([\w.]*\bstream)\s*,\s*(['\"])(\w+)\3")
# A socket stream's peer address is a description every TCP stream gives, not a simulation test.
STREAM_PEEKS_DESCRIBING = {"nameserver/connection.py": {"getattr(stream, socket)"}}
STREAM_PEEKS_LEFT: dict[str, set[str]] = {}  # the builders say what a stream is (objects=, remote_addr=, call_at=)


def stream_peeks(text: str) -> set[str]:
    return {f"{m.group(1)}({m.group(2)}, {m.group(4)})" for m in STREAM_PEEK.finditer(text)}


def test_the_stream_peek_pattern_finds_what_it_is_for():
    assert stream_peeks('self._call_at = getattr(stream, "call_at", None)') == {"getattr(stream, call_at)"}
    assert stream_peeks("if hasattr(stream, 'renew_peer_call'):") == {"hasattr(stream, renew_peer_call)"}
    assert stream_peeks('getattr(channel.stream, "delivers_everything", None)') == \
        {"getattr(channel.stream, delivers_everything)"}
    assert stream_peeks('getattr(self, "stream_limit")') == set()


def test_no_role_module_peeks_at_a_stream_but_what_is_listed_as_left():
    found = {}
    for name, text in role_files().items():
        peeks = stream_peeks(text) - STREAM_PEEKS_DESCRIBING.get(name, set())
        if peeks:
            found[name] = peeks
    check_listed(found, STREAM_PEEKS_LEFT, "a role peeks at its stream")
    for name, peeks in STREAM_PEEKS_DESCRIBING.items():
        assert peeks <= stream_peeks((ROOT / name).read_text()), f"gone from {name}: take it off"


# The simulator's words: its aggregation of idle traffic ("coasting") and its hooks on a simulated
# stream.
SIMULATION_WORDS = ("coast", "renew_peer_call", "call_renewer", "query_coaster", "watch_peer")
SIMULATION_WORDS_LEFT: dict[str, set[str]] = {}  # coasting rebalances watch the broker's listener (lab/sim/broker.py)


def test_no_role_module_speaks_of_the_simulator_but_what_is_listed_as_left():
    found = {}
    for name, text in role_files().items():
        words = {word for word in SIMULATION_WORDS if word in text.lower()}
        if words:
            found[name] = words
    check_listed(found, SIMULATION_WORDS_LEFT, "simulation-only code in a role module")


# A run on sockets imports nothing of the simulator: the lab builds the simulator's classes only
# for a simulated run. Who imports it today in a run on sockets (the importing file):
SIM_IMPORTERS_ON_SOCKETS_LEFT: set[str] = set()  # lab/run/cluster.py's roles_for imports it only when simulated

_WATCH_SIM_IMPORTS = """
import importlib.abc, sys, traceback
from pathlib import Path
ROOT = Path(sys.argv[1])

class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "lab.sim" or name.startswith("lab.sim."):
            for frame in reversed(traceback.extract_stack()[:-1]):
                where = Path(frame.filename)
                if ROOT in where.parents and ROOT / "lab" / "sim" not in where.parents:
                    print("SIM-IMPORTER", where.relative_to(ROOT), flush=True)
                    break
        return None

sys.meta_path.insert(0, Watch())
from lab.cli import entry
sys.argv = ["nslab", *sys.argv[2:]]
sys.exit(entry())
"""


def test_a_run_on_sockets_imports_nothing_of_the_simulator_but_what_is_listed_as_left(tmp_path):
    result = subprocess.run([sys.executable, "-c", _WATCH_SIM_IMPORTS, str(ROOT), "up", "--headless",
                             "--duration", "1s", "--events", str(tmp_path / "events")],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "mode=sockets" in result.stdout
    importers = {line.split(" ", 1)[1] for line in result.stdout.splitlines() if line.startswith("SIM-IMPORTER ")}
    assert importers - SIM_IMPORTERS_ON_SOCKETS_LEFT == set(), "a run on sockets imports lab.sim"
    assert SIM_IMPORTERS_ON_SOCKETS_LEFT - importers == set(), "gone from there: take it off the list"

"""An application under test: a scenario's [[app]] table or `nslab run --app`, checked.

    [[app]]
    name = "app"                 # its node name (default "app"); faults name it: partition app / ns-0
    command = "java -jar my-app.jar --namesrv {namesrv}"   # optional here: else `--app 'CMD'` gives it
    grace = "10s"                # between SIGTERM and SIGKILL when the lab stops it (default 10 s)
    cwd = "path/to/dir"          # optional; relative to the directory nslab runs in
    [app.env]                    # optional: added to the app's environment
    JAVA_OPTS = "-Xmx256m"
    APP_HISTORY = "{appdir}/history.jsonl"

The command is split as a POSIX shell would split words (shlex) and run without a shell; `{namesrv}`
in any word becomes the NameServer address list ("host:port;host:port", as RocketMQ writes it), and
`{appdir}` the app's folder: the absolute path of the directory holding its stdout and stderr
(<run dir>/apps, else <events>.apps, else a kept temporary folder), where it writes its own files
(a history) rather than in the directory nslab runs in. Both are substituted in [app.env] values
too; the app's environment also has NAMESRV_ADDR and NSLAB_APP_DIR (the folder).
A command that needs a shell says so, and quotes the list there (its ';' would end a shell command):
`sh -c 'cd app && ./run.sh "{namesrv}"'`, or reads "$NAMESRV_ADDR".

On the command line: `nslab run NAME --app 'CMD'` (repeatable) fills the first [[app]] without a
command, else adds an app named app, app-2, ...; `--app 'NAME=CMD'` fills or adds the app NAME.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace

NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}")
DEFAULT_NAME = "app"
DEFAULT_GRACE = 10.0
MAX_GRACE = 600.0
KEYS = ("name", "command", "grace", "env", "cwd")
APP_DIR_ENV = "NSLAB_APP_DIR"


def substitute(text: str, namesrv: str, appdir: str) -> str:
    return text.replace("{namesrv}", namesrv).replace("{appdir}", appdir)


class AppSpecError(ValueError):
    """A bad app: the message names the key (name, command, grace, env, cwd) first, 'KEY: what'."""


@dataclass(frozen=True)
class AppSpec:
    name: str = DEFAULT_NAME
    command: str | None = None  # None: a slot the command line fills (--app)
    grace: float = DEFAULT_GRACE
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None

    def argv(self, namesrv: str, appdir: str = "") -> list[str]:
        """The command's words, `{namesrv}` and `{appdir}` replaced in each."""
        return [substitute(word, namesrv, appdir) for word in shlex.split(self.command or "")]

    def environment(self, namesrv: str, appdir: str) -> dict[str, str]:
        """What the app gets added to its environment: [app.env] (`{namesrv}`, `{appdir}` replaced),
        NAMESRV_ADDR and NSLAB_APP_DIR."""
        return {**{k: substitute(v, namesrv, appdir) for k, v in self.env.items()},
                "NAMESRV_ADDR": namesrv, APP_DIR_ENV: appdir}

    def to_record(self) -> dict:
        return {"name": self.name, "command": self.command, "grace": self.grace,
                **({"env": dict(self.env)} if self.env else {}), **({"cwd": self.cwd} if self.cwd else {})}


def check_name(name: object) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise AppSpecError(f"name: {name!r} is not a node name (lower-case letters, digits, - and _, "
                           "starting with a letter, at most 40)")
    return name


def check_command(command: object) -> str:
    if not isinstance(command, str) or not command.strip():
        raise AppSpecError("command: give the command that runs the app, as a string")
    try:
        words = shlex.split(command)
    except ValueError as e:  # an unclosed quote
        raise AppSpecError(f"command: {e}: {command!r}") from None
    if not words:
        raise AppSpecError("command: give the command that runs the app, as a string")
    return command


def from_table(table: object, parse_duration) -> AppSpec:
    """A scenario's [[app]] table; AppSpecError 'KEY: what is wrong'."""
    if not isinstance(table, dict):
        raise AppSpecError("app: write each app as an [[app]] table")
    for key in table:
        if key not in KEYS:
            raise AppSpecError(f"{key}: unknown key (keys: {', '.join(KEYS)})")
    name = check_name(table.get("name", DEFAULT_NAME))
    command = table.get("command")
    if command is not None:
        command = check_command(command)
    grace = DEFAULT_GRACE
    if "grace" in table:
        try:
            grace = parse_duration(table["grace"])
        except ValueError as e:
            raise AppSpecError(f"grace: {e}") from None
        if not 0 <= grace <= MAX_GRACE:
            raise AppSpecError(f"grace: {grace:g}s is out of range 0..{MAX_GRACE:g}s")
    env = table.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, (str, int, float, bool))
                                            for k, v in env.items()):
        raise AppSpecError('env: a table of variables, e.g. [app.env] JAVA_OPTS = "-Xmx256m"')
    cwd = table.get("cwd")
    if cwd is not None and (not isinstance(cwd, str) or not cwd):
        raise AppSpecError("cwd: a directory, as a string")
    return AppSpec(name, command, grace, {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in env.items()},
                   cwd)


def from_option(text: str) -> tuple[AppSpec, bool]:
    """`--app 'CMD'` or `--app 'NAME=CMD'` (NAME: a node name; the command's own first word never has
    an '=' since it runs without a shell: environment variables go in the scenario's [app.env]).
    The app, and whether the option named it."""
    head, sep, rest = text.partition("=")
    if sep and NAME.fullmatch(head) and rest.strip():
        return AppSpec(name=head, command=check_command(rest)), True
    return AppSpec(command=check_command(text)), False


def combine(declared: list[AppSpec], options: list[str]) -> list[AppSpec]:
    """A scenario's apps with the command line's: each unnamed `--app CMD` fills the next declared app
    without a command, then becomes a new app (app, app-2, app-3, ...); a named one fills the declared
    app of that name or adds one. AppSpecError on a name given twice."""
    apps = list(declared)
    for text in options:
        spec, named = from_option(text)
        if named:
            at = next((i for i, a in enumerate(apps) if a.name == spec.name), None)
            if at is None:
                apps.append(spec)
            elif apps[at].command is None:
                apps[at] = replace(apps[at], command=spec.command)
            else:
                raise AppSpecError(f"--app {text!r}: the scenario gives {spec.name!r} a command already")
            continue
        at = next((i for i, a in enumerate(apps) if a.command is None), None)
        if at is not None:
            apps[at] = replace(apps[at], command=spec.command)
            continue
        taken = {a.name for a in apps}
        name = DEFAULT_NAME if DEFAULT_NAME not in taken else next(
            f"{DEFAULT_NAME}-{n}" for n in range(2, 1000) if f"{DEFAULT_NAME}-{n}" not in taken)
        apps.append(replace(spec, name=name))
    return apps


def missing_commands(apps: list[AppSpec]) -> list[str]:
    return [a.name for a in apps if a.command is None]

"""`nslab serve`: one lab, its terminal UI in every browser tab of a room.

The lab runs as a child process (`nslab up --headless` with the options given); textual-serve's
web server runs here, on asyncio, and each browser tab that opens its websocket gets a process of
its own, `nslab attach --lab PID` — so a tab sees the run so far and follows it (feed.py), and
nothing a tab does (or its slow network) reaches the lab but a chaos action.

Who may drive: the URL printed first (the teacher's) carries a control key; the viewers' URL
watches (`nslab attach --read-only`: the chaos keys hidden) unless --allow-control. The key is in
the page's URL and the websocket's path (`/ws/KEY`), checked in constant time. On loopback the
viewers' URL needs no key; on any other address it has a key of its own, so nobody on the network
watches without being given the link. The websocket only answers a page of this server (Origin),
and on loopback only under a loopback name (Host: no DNS rebinding). Every asset is served from
textual-serve's package (its page's one remote link, Google Fonts, is replaced by the fonts it
ships: lab/tui/web/app_index.html), so a room offline works.

At most --max-sessions tabs at once (each is a process of ~45 MB), one seat of them kept for the
teacher's key: anyone who can reach a keyless loopback page cannot exhaust the machine's memory, nor
lock the teacher out.

The lab and every tab end with `nslab serve`, however it ends: on SIGINT, SIGTERM or SIGHUP (its
terminal closed) it stops the lab gracefully and closes the tabs; if it is killed outright, the
lab gets SIGTERM and the tabs SIGKILL from the kernel (lab/run/lifeline.py). Both are forked from
the event loop's thread, the main one, as that mechanism needs.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import ipaddress
import logging
import os
import secrets
import shlex
import signal
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

import textual_serve
from aiohttp import WSCloseCode, web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from lab.control import live
from lab.run import lifeline
from lab.tui.launch import TUI_SPEED

LAB_START = 60.0  # s for the lab to start listening
LAB_STOP = 30.0  # s for the lab's graceful stop on Ctrl-C
WEB = Path(__file__).with_name("web")
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}

log = logging.getLogger("nslab.serve")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Access:
    """Who a URL's key makes its holder: "control", "view", or nobody (None)."""

    def __init__(self, loopback: bool, allow_control: bool):
        self.allow_control = allow_control
        self.control_key = secrets.token_urlsafe(16)
        self.view_key = None if loopback else secrets.token_urlsafe(16)

    def role(self, key: str | None) -> str | None:
        viewer = "control" if self.allow_control else "view"
        if key and hmac.compare_digest(key, self.control_key):
            return "control"
        if self.view_key is None:  # loopback: no key (or any other) watches
            return viewer if not key else None
        return viewer if key and hmac.compare_digest(key, self.view_key) else None

    def urls(self, base: str) -> tuple[str, str]:
        """(the teacher's URL, the viewers')."""
        return f"{base}/?key={self.control_key}", f"{base}/" + (f"?key={self.view_key}" if self.view_key else "")

    def is_teacher(self, key: str | None) -> bool:
        return bool(key) and hmac.compare_digest(key, self.control_key)


def attach_command(pid: int, role: str) -> str:
    """What each tab runs. textual-serve starts it with a shell: `exec`, so the process is this
    server's own child (a shell between them would outlive the server, and the tab with it)."""
    words = [sys.executable, "-m", "lab.cli", "attach", "--lab", str(pid)]
    return "exec " + shlex.join(words if role == "control" else [*words, "--read-only"])


class Tab(AppService):
    """One tab's `nslab attach`, killed by the kernel if this server dies (it holds nothing to save)."""

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        return {**super()._build_environment(width, height), **lifeline.environment(signal.SIGKILL)}


class LabServer(Server):
    """textual-serve's server with nslab's access rules and a page that fetches nothing remote."""

    def __init__(self, lab_pid: int, access: Access, host: str, port: int, max_sessions: int):
        super().__init__(attach_command(lab_pid, "view"), host=host, port=port, title=f"nslab · lab {lab_pid}",
                         statics_path=Path(textual_serve.__file__).parent / "static", templates_path=WEB)
        self.lab_pid, self.access = lab_pid, access
        self.loopback = is_loopback(host)
        self.max_sessions = max_sessions
        self.sockets: dict[web.WebSocketResponse, bool] = {}  # one a tab: whether it holds the teacher's key

    async def _make_app(self) -> web.Application:
        import aiohttp_jinja2
        import jinja2

        app = web.Application()
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.templates_path), autoescape=True)
        app.add_routes([
            web.get("/", self.handle_index, name="index"),
            web.get("/ws/{key}", self.handle_websocket, name="websocket"),
            web.static("/static", self.statics_path, name="static"),
            web.get("/favicon.ico", lambda request: web.Response(status=204)),  # none, and no 404 in the console
        ])
        app.on_shutdown.append(self.on_shutdown)
        return app

    def _host_ok(self, request: web.Request) -> bool:
        """On loopback, only a loopback name: a page from elsewhere that rebinds its own name to
        127.0.0.1 would otherwise be same-origin with us."""
        if not self.loopback:
            return True
        name = urlsplit("//" + request.host).hostname or ""
        return name in LOOPBACK_NAMES

    def full(self, teacher: bool) -> str | None:
        """Why a new tab is refused, or None. Viewers may hold every seat but one: the teacher's."""
        viewers = sum(not held for held in self.sockets.values())
        if len(self.sockets) < self.max_sessions and (teacher or viewers < self.max_sessions - 1):
            return None
        open_ = f"{len(self.sockets)} tab{'s' * (len(self.sockets) != 1)} open"
        return (f"Every seat of this lab is taken: {open_} (nslab serve --max-sessions "
                f"{self.max_sessions}, one seat kept for the teacher's link). Close a tab, then reload.")

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        import aiohttp_jinja2

        key = request.query.get("key")
        if not self._host_ok(request) or self.access.role(key) is None:
            raise web.HTTPForbidden(text="This lab's page needs the link with its key: ask whoever runs `nslab serve`.")
        if why := self.full(self.access.is_teacher(key)):
            raise web.HTTPServiceUnavailable(text=why)
        scheme = "wss" if request.secure else "ws"
        context = {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": f"{scheme}://{request.host}/ws/{key or 'view'}",
            "config": {"static": {"url": "/static/"}},
            "application": {"name": self.title},
        }
        return aiohttp_jinja2.render_template("app_index.html", request, context)

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
        key = request.match_info["key"]
        role = self.access.role(None if key == "view" else key)
        origin = request.headers.get("Origin")
        if role is None or not self._host_ok(request) or (origin and urlsplit(origin).netloc != request.host):
            raise web.HTTPForbidden(text="no")
        websocket = web.WebSocketResponse(heartbeat=15)
        if why := self.full(self.access.is_teacher(key)):  # a page loaded before the seats filled
            await websocket.prepare(request)
            await websocket.send_bytes(f"\r\n  {why}\r\n".encode())  # what the tab's terminal shows
            await websocket.close(code=WSCloseCode.TRY_AGAIN_LATER, message=b"too many tabs")
            return websocket
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        app_service: AppService | None = None
        self.sockets[websocket] = self.access.is_teacher(key)  # before any await: no two tabs get one seat
        try:
            await websocket.prepare(request)
            app_service = Tab(attach_command(self.lab_pid, role), write_bytes=websocket.send_bytes,
                              write_str=websocket.send_str, close=websocket.close,
                              download_manager=self.download_manager)
            await app_service.start(width, height)
            await self._process_messages(websocket, app_service)
        except asyncio.CancelledError:
            await websocket.close()
        except Exception:  # one tab's trouble: logged, the others go on
            log.exception("a browser tab's session failed")
        finally:
            self.sockets.pop(websocket, None)
            if app_service is not None:
                await app_service.stop()  # the tab's `nslab attach` quits
        return websocket

    async def on_shutdown(self, app: web.Application) -> None:
        for websocket in list(self.sockets):
            await websocket.close(code=WSCloseCode.GOING_AWAY, message=b"the lab server stopped")


def lab_argv(args: argparse.Namespace) -> list[str]:
    """`nslab up --headless` with serve's lab options; at the UI's speed unless told."""
    argv = [sys.executable, "-m", "lab.cli", "up", "--headless",
            "--speed", str(args.speed if args.speed is not None else TUI_SPEED)]
    for flag in ("sim", "processes"):
        if getattr(args, flag):
            argv.append(f"--{flag}")
    for option in ("config", "duration", "seed", "events", "run_dir"):
        value = getattr(args, option)
        if value is not None:
            argv += [f"--{option.replace('_', '-')}", str(value)]
    for item in args.set:
        argv += ["--set", item]
    return argv


def room_address(host: str) -> str:
    """The name to print for a wildcard --host: this machine's address on the room's network."""
    if host not in ("0.0.0.0", "::", ""):
        return f"[{host}]" if ":" in host else host
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: only the route is looked up
            return probe.getsockname()[0]
    except OSError:
        return socket.gethostname()


async def serve(args: argparse.Namespace) -> int:
    # Its own session: a terminal's Ctrl-C or hangup reaches only this server, which stops the lab
    # gracefully; SIGTERM from the kernel if this server dies first (the lab then stops as gracefully).
    lab = await asyncio.create_subprocess_exec(*lab_argv(args), stdout=asyncio.subprocess.PIPE,
                                               env={**os.environ, **lifeline.environment(signal.SIGTERM)},
                                               start_new_session=True)
    info = await _wait_for_lab(lab)
    if info is None:
        code = await lab.wait()
        print(f"nslab serve: the lab did not start (exit {code})", file=sys.stderr)
        return 2
    access = Access(is_loopback(args.host), args.allow_control)
    server = LabServer(lab.pid, access, args.host, args.port, args.max_sessions)
    runner = web.AppRunner(await server._make_app(), shutdown_timeout=5.0, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, args.host, args.port)
        await site.start()
    except OSError as e:
        await runner.cleanup()
        await _stop_lab(lab)
        print(f"nslab serve: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 2
    port = site._server.sockets[0].getsockname()[1]  # the real one, for --port 0
    teacher, viewers = access.urls(f"http://{room_address(args.host)}:{port}")
    print(teacher, flush=True)
    print(f"viewers ({'they may drive too' if args.allow_control else 'watch only'}): {viewers}", flush=True)
    print(f"lab {lab.pid} ({info.get('mode')}, seed {info.get('seed')}) — Ctrl-C stops it", flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGHUP: the terminal closed
        loop.add_signal_handler(sig, stop.set)
    relay = asyncio.create_task(_relay(lab.stdout))
    ended = asyncio.create_task(lab.wait())
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait([ended, stopping], return_when=asyncio.FIRST_COMPLETED)
    if ended.done():  # its duration passed, or it failed: the pages stay readable
        print(f"the lab ended (exit {lab.returncode}); its pages stay until Ctrl-C", flush=True)
        await stopping
    try:
        await _stop_lab(lab)
        await relay
    finally:
        await runner.cleanup()
        ended.cancel()
    return 0


async def _wait_for_lab(lab) -> dict | None:
    deadline = asyncio.get_running_loop().time() + LAB_START
    while lab.returncode is None and asyncio.get_running_loop().time() < deadline:
        for info in live.running_labs():
            if info["pid"] == lab.pid and "events" in info and "namesrv_addr" in info:
                return info
        await asyncio.sleep(0.1)
    if lab.returncode is None:
        lab.kill()
    return None


async def _stop_lab(lab) -> None:
    """Gracefully (SIGINT: brokers unregister, viewers get run.end), then for good."""
    if lab.returncode is not None:
        return
    lab.send_signal(signal.SIGINT)
    try:
        await asyncio.wait_for(lab.wait(), LAB_STOP)
    except TimeoutError:
        lab.kill()
        await lab.wait()


async def _relay(stream: asyncio.StreamReader) -> None:
    """The lab's own lines (NAMESRV_ADDR, its seed, its summary), after the URLs."""
    while line := await stream.readline():
        print(f"lab: {line.decode(errors='replace').rstrip()}", flush=True)


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="nslab serve: %(message)s")
    if args.max_sessions < 1:
        print(f"nslab serve: --max-sessions {args.max_sessions}: must be at least 1 (the teacher's tab)",
              file=sys.stderr)
        return 2
    try:
        live.runtime_dir()  # where the lab it starts is found: refused here in one line, as `nslab up` does
    except live.LiveError as e:
        print(f"nslab serve: {e}", file=sys.stderr)
        return 2
    return asyncio.run(serve(args))

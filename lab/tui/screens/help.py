"""What every panel, table and timer means, a sentence each, and the keys."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from ..widgets.key_bar import KeyBar

HELP = """\
# nslab — what you are looking at

**NameServers are independent**: they never talk to each other. Every broker registers with every
NameServer; clients pick one and pull routes from it: routes are pulled, never pushed.

## Each NameServer's five tables

- **brokerLiveTable** — broker address → when it last registered. The bar is the heartbeat's age
  against the **120 s expiry**. A silent broker (frozen, hung) is removed one of two ways, both
  counted from its last heartbeat: its connection, idle for **120 s**, is closed
  (`channel_closed: idle for 120 s`), or the **10 s scan** finds it past the expiry (`expired`).
  With RocketMQ's defaults the idle close comes first: it fires at 120 s, the scan only at its
  next pass after that (120–130 s). The scan shows when the idle close is off or longer: scenario
  `broker-freeze-scan`, or `--set nameserver.serverChannelMaxIdleTimeSeconds=0`. A closed
  connection (a killed broker) removes it at once. A panel's title says **killed** or
  **frozen** when its NameServer is; a row just removed stays struck through with its age.
- **brokerAddrTable** — broker name → its cluster and addresses by broker id (0 master, ≥1 slave).
- **clusterAddrTable** — cluster → the broker names in it.
- **topicQueueTable** — topic → per broker name: read/write queue counts and permission (rw, r-).
- **filterServerTable** — broker address → its filter servers (usually empty).

A row on a red background **differs between the live NameServers**; the figure at its end is how
long they have disagreed — the divergence monitor RocketMQ's maintainers recommend. A dim row is
one this NameServer lacks while another holds it.

## Timers (RocketMQ's defaults)

- **30 s registration**: each broker re-registers with every NameServer (its heartbeat).
- **10 s scan**: each NameServer removes brokers silent for **120 s** — unless the **120 s idle
  close** of their connection removed them first (it does, with these defaults).
- **30 s route poll**: each client asks its NameServer for every topic's route. Between polls a
  client keeps routing to what it knows — a dead broker stays in its cache; retries (2 by
  default, on another broker) cover the gap.

## Brokers and clients

- **Brokers**: role, state (up / killed / frozen / cut off), whether each NameServer **holds** it
  now, or removed it in the last minute (how long ago, and why: expired, channel_closed,
  unregistered), or does not hold it (**not here**: never had it, or removed over a minute ago);
  a failed registration with its full reason; the group's write permission — **r-** (read only),
  **master frozen (routed)** while NameServers still send clients to a frozen master, and
  **write-less** once no live master is listed stand out from **rw** — and stored messages.
- **Clients**: state (**cut off** only when a partition separates it from its NameServer or a
  broker it uses), the NameServer each uses, the age of its last route from a NameServer, **cache**
  when its last fetch failed and it runs on its cached route, **messages** acknowledged / failed
  (after every attempt), retries, the brokers its sends recently failed on (avoided), and
  consumer lag; a crashed client is listed last with its error. Below: messages per second,
  acknowledged and failed, on **one scale** (every send failing looks nothing like a healthy
  cluster), and the current rates: `ok 10/s · failed 10/s (50 %)`, the share in brackets of
  messages that failed.
- **Events**: the **story** on top — chaos actions, removals (with the broker's name and the
  reason), registrations (first, or again N s after a removal), clients on cached routes and
  back, crashes, check results: kept for the whole run. Under it the event log, coloured by kind, chaos actions marked ◆, repeats
  collapsed (`producer.failed ×120`). Type in the filter to search every record kept (sends,
  consumes, route fetches are hidden otherwise).
- **Checks**: the scenario as a lesson: what it teaches, its timeline (┃ a fault, ▲ now), the
  phase under way, each expectation pending …, held ✓ or failed ✗, and the verdict.
- A row that vanished from a NameServer's table stays a few seconds, struck through and dimmed.

## Keys

| key | does |
| --- | --- |
| space | pause / resume (replay: play / pause) |
| + / - | faster / slower |
| . | step one second (simulated mode and replay, while paused) |
| j | jump to a time (replay) |
| k f u r s | kill, freeze, unfreeze, restart, stop (gracefully) a node |
| p i h | partition (pick the sides), isolate a node, heal the network |
| t | a link toxic: latency, loss, bandwidth, blackhole, reset |
| n / N | take NameServers down / bring them up |
| w / W | wipe / add a broker group's write permission |
| c g | start a new client, grow a broker's topic table |
| 1 2 3 4 | brokers, clients, events, checks (also after Tab out of the filter) |
| / | filter the event log; escape or Tab leaves it |
| tab | move between the panels, the filter and the log |
| ctrl+p | the command palette: every action by name |
| q | quit: every node stopped cleanly |

`nslab chaos …` from another terminal drives this same lab.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close", id="help.close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog help"):
            yield Markdown(HELP)
        yield KeyBar()

"""Bodies a run's clients decode, kept once for all of them: the run's, never the module's.

Every client polls every topic every 30 s and the answer is nearly always the last one: decoding it
again, and comparing the routes field by field, was most of a poll's cost, and each of 20 clients
of 2,000 topics kept its own copy of every route. Decoded routes are never changed, so the clients
of one run share them (a simulated NameServer's bodies are shared bytes objects: `is` mostly
settles it). Likewise consumer id lists: every member asks a broker for its group once per topic
every 20 s, and a broker keeps its answer's bytes while the group stays as it is. The lab makes one
DecodedBodies per run (lab/run/cluster.py) and a client made on its own gets its own, so which
objects clients share never depends on what ran before in the process. Bounded, by count.
"""

from __future__ import annotations

from nameserver import bodies
from nameserver.routes import TopicRouteData

ROUTES_MAX = 20_000
ID_LISTS_MAX = 1_000


class DecodedBodies:
    def __init__(self) -> None:
        self._routes: dict[tuple[str, int], tuple[bytes, TopicRouteData]] = {}  # (topic, type) -> last
        self._id_lists: dict[tuple[bytes, int], tuple[str, ...]] = {}

    def route(self, topic: str, body: bytes, serialize_type: int) -> TopicRouteData:
        """The TopicRouteData of a route body: the same object for the same body as last time."""
        key = (topic, serialize_type)
        last = self._routes.get(key)
        if last is not None and (last[0] is body or last[0] == body):
            return last[1]
        route = bodies.route_from_wire(bodies.load(body, serialize_type))
        if len(self._routes) >= ROUTES_MAX and key not in self._routes:
            self._routes.clear()
        self._routes[key] = (body, route)
        return route

    def last_routes(self, topics: list[str], serialize_type: int) -> list[tuple[bytes, TopicRouteData] | None]:
        """(body, route) per topic: the route body last decoded for it, and its route."""
        get = self._routes.get
        return [get((topic, serialize_type)) for topic in topics]

    def consumer_ids(self, body: bytes, serialize_type: int) -> tuple[str, ...]:
        """The consumer ids in a GET_CONSUMER_LIST_BY_GROUP answer's body (a shared tuple)."""
        key = (body, serialize_type)
        ids = self._id_lists.get(key)
        if ids is None:
            ids = tuple(str(c) for c in bodies.load(body, serialize_type)["consumerIdList"])
            if len(self._id_lists) >= ID_LISTS_MAX:
                self._id_lists.clear()
            self._id_lists[key] = ids
        return ids

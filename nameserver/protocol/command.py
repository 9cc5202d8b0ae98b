"""RemotingCommand: one request or response, independent of how its header is serialised."""

from __future__ import annotations

from dataclasses import dataclass

from .codes import CURRENT_VERSION, FLAG_ONEWAY, FLAG_RESPONSE, SerializeType


LANGUAGE = "PYTHON"  # the language the lab's own requests announce
# What every reply announces. The servers nslab models (NameServer, broker) are Java's, whose
# replies say JAVA; the lab's clients' few replies (to a broker asking them) share this path.
REPLY_LANGUAGE = "JAVA"


class HeaderError(ValueError):
    """A request's extFields lack a required field or carry one that does not parse."""


@dataclass(slots=True)
class RemotingCommand:
    code: int
    opaque: int = 0
    flag: int = 0
    # RocketMQ's "custom header", flattened to strings as Java's RemotingCommand does.
    ext_fields: dict[str, str] | None = None
    remark: str | None = None
    body: bytes | None = None
    language: str = LANGUAGE
    version: int = CURRENT_VERSION
    serialize_type: SerializeType = SerializeType.JSON

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, object] | None = None,
        body: bytes | None = None,
        *,
        oneway: bool = False,
        serialize_type: SerializeType = SerializeType.JSON,
        version: int = CURRENT_VERSION,
        opaque: int = 0,
    ) -> RemotingCommand:
        # Positional, in the fields' order: every request is built here. Built as its peer decodes
        # it from the wire (extFields strings, no empty body): a simulated network hands it over whole.
        return cls(code, opaque, FLAG_ONEWAY if oneway else 0,
                   stringify_fields(ext_fields) if ext_fields is not None else None,
                   None, body or None, LANGUAGE, version, serialize_type)

    def response(
        self,
        code: int,
        remark: str | None = None,
        *,
        ext_fields: dict[str, object] | None = None,
        body: bytes | None = None,
    ) -> RemotingCommand:
        """A reply to this request: same opaque and serialize type, the response flag set."""
        # Positional, in the fields' order, as this runs for every reply: a dataclass __init__
        # with keywords costs twice as much.
        return RemotingCommand(
            code, self.opaque, FLAG_RESPONSE,
            stringify_fields(ext_fields) if ext_fields is not None else None,
            remark, body or None, REPLY_LANGUAGE, CURRENT_VERSION, self.serialize_type,
        )

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    # --- typed access to extFields, parsed as Java's decodeCommandCustomHeader does ---

    def field(self, name: str) -> str | None:
        return self.ext_fields.get(name) if self.ext_fields else None

    def require(self, name: str) -> str:
        value = self.field(name)
        if value is None:
            raise HeaderError(f"missing header field '{name}'")
        return value

    def int_field(self, name: str, default: int | None = None) -> int | None:
        ext = self.ext_fields  # field(), inline: a broker reads a dozen of these per message
        value = ext.get(name) if ext else None
        if value is None:
            return default
        try:
            return int(value)
        except ValueError:
            raise HeaderError(f"header field '{name}' is not an integer: {value!r}") from None

    def require_int(self, name: str) -> int:
        value = self.int_field(name)
        if value is None:
            raise HeaderError(f"missing header field '{name}'")
        return value

    def require_ints(self, *names: str) -> list[int]:
        """Several required integer fields in one go, as decodeCommandCustomHeader reads a header:
        the first missing or unparsable one is the error."""
        ext = self.ext_fields or {}
        values = []
        for name in names:
            value = ext.get(name)
            if value is None:
                raise HeaderError(f"missing header field '{name}'")
            try:
                values.append(int(value))
            except ValueError:
                raise HeaderError(f"header field '{name}' is not an integer: {value!r}") from None
        return values

    def bool_field(self, name: str, default: bool = False) -> bool:
        value = self.field(name)
        # Java's Boolean.parseBoolean: only "true" (any case) is true.
        return default if value is None else value.lower() == "true"


def stringify(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# Small numbers' strings, made once: a held request keeps its extFields for as long as it is held
# (a large cluster holds a pull for each of tens of thousands of idle queues), and most of their
# numbers (queue ids, flags, offsets of queues that saw nothing) are small.
_SMALL_INTS = {i: str(i) for i in range(-1, 1024)}


def stringify_fields(fields: dict[str, object]) -> dict[str, str]:
    """extFields as Java sends them: every non-null value as its toString()."""
    # Strings and ints, most values, skip the call: every request and reply passes here.
    return {k: v if type(v) is str else (_SMALL_INTS.get(v) or str(v)) if type(v) is int else stringify(v)
            for k, v in fields.items() if v is not None}


__all__ = ["RemotingCommand", "HeaderError", "stringify", "stringify_fields"]

"""The engine integrations' options (vLLM's ``kv_connector_extra_config``, SGLang's storage extra config), checked
once at start: a wrong type or value is one line naming the option, what was given and what is expected; an
unknown option is a warning that lists the known ones. Standard library only."""

import math
from typing import Any, Dict, Iterable, Optional, Sequence, Union

#: An option's value: what ``Option.parse`` returns.
Value = Union[str, float, int, bool, None]


class OptionError(ValueError):
    """An engine option of the wrong type or out of range: the message names the option, the value given and
    what is expected."""


class Option:
    """One option: its name, kind (``"str"``, ``"float"``, ``"int"``, ``"bool"``), default and bounds."""

    __slots__ = ("name", "kind", "default", "minimum", "maximum", "doc")

    def __init__(self, name: str, kind: str, default: Value, doc: str, minimum: Optional[float] = None,
                 maximum: Optional[float] = None) -> None:
        self.name = name
        self.kind = kind
        self.default = default
        self.minimum = minimum
        self.maximum = maximum
        self.doc = doc

    def expected(self) -> str:
        """What a good value is, in words (for the error message)."""
        text = {"str": "a non-empty string", "float": "a number", "int": "an integer",
                "bool": "true or false"}[self.kind]
        if self.minimum is not None and self.maximum is not None:
            text += " from %s to %s" % (self.minimum, self.maximum)
        elif self.minimum is not None:
            text += " >= %s" % self.minimum
        return text

    def parse(self, where: str, value: Any) -> Any:
        """``value`` (None: the default) checked and converted to the option's kind; OptionError if it is bad."""
        if value is None:
            return self.default
        number: Union[int, float]
        bad = OptionError("%s option %r: got %r (%s); expected %s" % (where, self.name, value, type(value).__name__,
                                                                      self.expected()))
        if self.kind == "str":
            if not isinstance(value, str) or not value:
                raise bad
            return value
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
                return value.lower() in ("true", "1", "yes")
            if isinstance(value, int) and value in (0, 1):
                return bool(value)
            raise bad
        if isinstance(value, bool):
            raise bad
        try:
            number = float(value) if self.kind == "float" else int(value)
        except (TypeError, ValueError):
            raise bad from None
        if self.kind == "int" and isinstance(value, float) and value != int(value):
            raise bad
        if isinstance(number, float) and not math.isfinite(number):
            raise bad
        if self.minimum is not None and number < self.minimum or self.maximum is not None and number > self.maximum:
            raise bad
        return number


def parse_options(where: str, given: Optional[Dict[Any, Any]], options: Sequence[Option], logger: Any,
                  passthrough: Iterable[str] = ()) -> Dict[str, Any]:
    """The values of ``options`` (a sequence of Option) read from the dict ``given``: defaults for those absent,
    OptionError for a bad one; one warning through ``logger`` naming every unknown key and the known ones (keys
    in ``passthrough`` are the engine's own and pass silently)."""
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise OptionError("%s: expected a JSON object of options, got %r" % (where, given))
    known = {o.name: o for o in options}
    unknown = sorted(str(k) for k in given if k not in known and k not in passthrough)
    if unknown:
        logger.warning("kvstash: %s: unknown option%s %s ignored; known options: %s", where,
                       "s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(sorted(known)))
    return {o.name: o.parse(where, given.get(o.name)) for o in options}

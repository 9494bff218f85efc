"""The Python client's constants against the Java wire contract, read from the Java sources.

No JVM and no server: the test parses ``static final int|long|String NAME = <expr>;`` of the wire module
(its CountersDescriptor holds the counter ids and names), evaluates the constant expressions they use as
Java does (int/long literals, casts, arithmetic, shifts and bit operations with int/long overflow,
references to constants of the same class, a superclass or an imported class, ``SemanticVersion.compose``)
and compares every constant the Python client uses with its
Java counterpart through the explicit maps below. A mapped Java constant that disappears, or a value that
differs, fails the test; request types, statuses and dtypes are also checked for completeness in both
directions, and the counter names of CountersDescriptor against the client's reader of the labels section.
Struct formats of descriptor.py are checked against the Java lengths and field offsets.

When a Java constant moves or is renamed on purpose, update its entry in the maps here.
"""

import ast
import os
import re
import struct
import sys
import types
import unittest

CLIENT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(CLIENT_ROOT))
sys.path.insert(0, CLIENT_ROOT)             # as support.py does; this module runs without it too

from kvstash import descriptor as d                         # noqa: E402 (after the path above)
from kvstash.client import Client                           # noqa: E402 (after the path above)
from kvstash.connection import read_counter_labels          # noqa: E402 (after the path above)
from kvstash.keyrange import key_range                      # noqa: E402 (after the path above)
from kvstash.response import REGISTER_EXTRA                 # noqa: E402 (after the path above)
from kvstash.ring import Ring                               # noqa: E402 (after the path above)
from kvstash.types import Dtype, RequestType, Status        # noqa: E402 (after the path above)

WIRE_SOURCES = os.path.join(REPO, "wire", "src", "main", "java")


# ------------------------------------------------------------------------------------------- Java reader
_STRING = r'"(?:\\.|[^"\\])*"'
_COMMENT_OR_STRING = re.compile(r'("(?:\\.|[^"\\\n])*")|//[^\n]*|/\*.*?\*/', re.S)
_CONSTANT = re.compile(r"\b(public|protected|private)?\s*static\s+final\s+(int|long|String)\s+([A-Za-z_]\w*)\s*="
                       r"\s*((?:\"(?:\\.|[^\"\\])*\"|[^;\"])+);")
_TOKEN = re.compile(r"\s*(?:(0[xX][0-9a-fA-F_]+[lL]?|\d[\d_]*[lL]?)|(\"(?:\\.|[^\"\\])*\")|"
                    r"([A-Za-z_][\w.]*)|(>>>|<<|>>|[|^&+\-*/%~(),]))")
_BUILTINS = {"Long.BYTES": (8, "int"), "Integer.BYTES": (4, "int"), "Short.BYTES": (2, "int"),
             "Byte.BYTES": (1, "int")}
_CALLS = {"SemanticVersion.compose": lambda major, minor, patch: (major << 16) | (minor << 8) | patch}
_CALLS["org.agrona.SemanticVersion.compose"] = _calls_compose = _CALLS["SemanticVersion.compose"]
_BINARY = [("|",), ("^",), ("&",), ("<<", ">>", ">>>"), ("+", "-"), ("*", "/", "%")]   # loosest first


def strip_comments(source):
    """Java source without comments; string literals kept as they are."""
    return _COMMENT_OR_STRING.sub(lambda m: m.group(1) or " ", source)


def _wrap(value, java_type):
    """Java's two's-complement overflow of an int or long value."""
    if java_type == "String":
        return value
    bits = 32 if java_type == "int" else 64
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _binary(operator, left, right):
    """A Java binary operation on typed values (value, "int" | "long" | "String")."""
    (a, left_type), (b, right_type) = left, right
    if operator == "+" and "String" in (left_type, right_type):
        return str(a) + str(b), "String"
    if operator in ("<<", ">>", ">>>"):                    # type of the left operand, distance masked
        bits = 32 if left_type == "int" else 64
        distance = b & (bits - 1)
        if operator == "<<":
            value = a << distance
        elif operator == ">>":
            value = a >> distance
        else:
            value = (a & ((1 << bits) - 1)) >> distance
        return _wrap(value, left_type), left_type
    java_type = "long" if "long" in (left_type, right_type) else "int"
    if operator in ("/", "%"):
        quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)     # truncates toward zero
        value = quotient if operator == "/" else a - quotient * b
    else:
        value = {"|": a | b, "^": a ^ b, "&": a & b, "+": a + b, "-": a - b, "*": a * b}[operator]
    return _wrap(value, java_type), java_type


class JavaClass:
    """The constants, superclass and imports of one top-level Java class."""

    def __init__(self, path):
        self.path = path
        self.name = os.path.splitext(os.path.basename(path))[0]
        with open(path, encoding="utf-8") as f:
            self.source = strip_comments(f.read())
        package = re.search(r"^\s*package\s+([\w.]+)\s*;", self.source, re.M)
        self.package = package.group(1) if package else ""
        self.fqn = (self.package + "." + self.name).lstrip(".")
        extends = re.search(r"\bclass\s+%s\b[^{]*?\bextends\s+([\w.]+)" % re.escape(self.name), self.source)
        self.extends = extends.group(1) if extends else None
        self.imports = {}                       # simple name -> fully qualified class name
        self.static_imports = []                # (class fqn, member or "*")
        for static, target in re.findall(r"^\s*import\s+(static\s+)?([\w.*]+)\s*;", self.source, re.M):
            owner, _, member = target.rpartition(".")
            if static:
                self.static_imports.append((owner, member))
            else:
                self.imports[member] = target
        self.constants = {}                     # name -> (type, expression, visibility)
        for visibility, java_type, name, expression in _CONSTANT.findall(self.source):
            self.constants.setdefault(name, (java_type, expression.strip(), visibility or "package"))


class _Parser:
    """Precedence climbing over the tokens of one Java constant expression."""

    def __init__(self, tokens, resolve, text):
        self.tokens, self.resolve, self.text, self.position = tokens, resolve, text, 0

    def _peek(self, offset=0):
        k = self.position + offset
        return self.tokens[k] if k < len(self.tokens) else (None, None, None, None)

    def _take_operator(self, operator):
        if self._peek()[3] != operator:
            raise ValueError("cannot evaluate %r: expected %r" % (self.text, operator))
        self.position += 1

    def expression(self, level):
        if level == len(_BINARY):
            return self.unary()
        left = self.expression(level + 1)
        while self._peek()[3] in _BINARY[level]:
            operator = self._peek()[3]
            self.position += 1
            left = _binary(operator, left, self.expression(level + 1))
        return left

    def unary(self):
        number, string, identifier, operator = self._peek()
        if operator in ("-", "+", "~"):
            self.position += 1
            value, java_type = self.unary()
            return _wrap({"-": -value, "+": value, "~": ~value}[operator], java_type), java_type
        if operator == "(" and self._peek(1)[2] in ("int", "long") and self._peek(2)[3] == ")":
            java_type = self._peek(1)[2]
            self.position += 3
            return _wrap(self.unary()[0], java_type), java_type
        return self.primary()

    def primary(self):
        number, string, identifier, operator = self._peek()
        self.position += 1
        if number:
            java_type = "long" if number[-1] in "lL" else "int"
            return _wrap(int(number.rstrip("lL").replace("_", ""), 0), java_type), java_type
        if string:
            return ast.literal_eval(string), "String"
        if operator == "(":
            value = self.expression(0)
            self._take_operator(")")
            return value
        if identifier in _CALLS:
            self._take_operator("(")
            arguments = [self.expression(0)[0]]
            while self._peek()[3] == ",":
                self.position += 1
                arguments.append(self.expression(0)[0])
            self._take_operator(")")
            return _wrap(_CALLS[identifier](*arguments), "int"), "int"
        if identifier:
            return self.resolve(identifier)
        raise ValueError("cannot evaluate %r at token %d" % (self.text, self.position))


class JavaSources:
    """Every class under some source roots, with lazy, memoised evaluation of their constants."""

    def __init__(self, *roots_and_files):
        self.classes = {}
        for entry in roots_and_files:
            paths = [entry] if entry.endswith(".java") else [
                os.path.join(folder, name) for folder, _, names in os.walk(entry)
                for name in names if name.endswith(".java")]
            for path in paths:
                java_class = JavaClass(path)
                self.classes[java_class.fqn] = java_class
        self._values = {}
        self._evaluating = set()

    def find_class(self, name, context=None):
        """A class by fully qualified name, by simple name as ``context`` sees it, or by unique simple name."""
        if name in self.classes:
            return self.classes[name]
        if context is not None:
            if name == context.name:
                return context
            for candidate in (context.imports.get(name), context.package + "." + name):
                if candidate in self.classes:
                    return self.classes[candidate]
        matches = [c for c in self.classes.values() if c.name == name]
        if len(matches) == 1:
            return matches[0]
        raise KeyError("no Java class %s%s" % (name, " seen from " + context.fqn if context else ""))

    def value(self, reference):
        """Value of ``Class.CONSTANT`` (simple or qualified class name)."""
        class_name, _, constant = reference.rpartition(".")
        return self.constant(self.find_class(class_name), constant)

    def constant(self, java_class, name):
        return self._typed_constant(java_class, name)[0]

    def _typed_constant(self, java_class, name):
        key = (java_class.fqn, name)
        if key in self._values:
            return self._values[key]
        if name not in java_class.constants:
            raise KeyError("%s has no constant %s (%s)" % (java_class.fqn, name, java_class.path))
        if key in self._evaluating:
            raise ValueError("cyclic constant %s.%s" % key)
        self._evaluating.add(key)
        try:
            java_type, expression, _ = java_class.constants[name]
            value = _wrap(self._evaluate_typed(expression, java_class)[0], java_type)
        finally:
            self._evaluating.discard(key)
        self._values[key] = (value, java_type)
        return self._values[key]

    def resolve(self, identifier, java_class):
        """Value of an identifier as it appears in an expression of ``java_class``."""
        return self._resolve_typed(identifier, java_class)[0]

    def _resolve_typed(self, identifier, java_class):
        if identifier in _BUILTINS:
            return _BUILTINS[identifier]
        if "." in identifier:
            owner, _, member = identifier.rpartition(".")
            return self._typed_constant(self.find_class(owner, java_class), member)
        seen = java_class
        while seen is not None:                                            # own class, then superclasses
            if identifier in seen.constants:
                return self._typed_constant(seen, identifier)
            seen = self.find_class(seen.extends, seen) if seen.extends else None
        for owner, member in java_class.static_imports:                   # import static X.NAME / X.*
            if member == identifier or (member == "*" and identifier in self.find_class(owner).constants):
                return self._typed_constant(self.find_class(owner), identifier)
        raise KeyError("cannot resolve %s in %s" % (identifier, java_class.fqn))

    def evaluate(self, expression, java_class):
        """Value of a constant expression of ``java_class`` as Java computes it: int and long literals
        (hex, underscores, L), string literals, names, ``SemanticVersion.compose``, (int)/(long) casts, unary
        - + ~, and * / % + - << >> >>> & ^ | with Java's precedence, overflow and shift masking."""
        return self._evaluate_typed(expression, java_class)[0]

    def _evaluate_typed(self, expression, java_class):
        tokens = []
        position = 0
        while expression[position:].strip():
            match = _TOKEN.match(expression, position)
            if not match:
                raise ValueError("cannot evaluate %r in %s" % (expression, java_class.fqn))
            position = match.end()
            tokens.append(match.groups())
        parser = _Parser(tokens, lambda name: self._resolve_typed(name, java_class), expression)
        value = parser.expression(0)
        if parser.position != len(tokens):
            raise ValueError("cannot evaluate %r: trailing tokens" % expression)
        return value

    def public_constants(self, class_name):
        """{name: value} of the public constants of a class."""
        java_class = self.find_class(class_name)
        return {name: self.constant(java_class, name)
                for name, (_, _, visibility) in java_class.constants.items() if visibility == "public"}

    def string_array(self, class_name, array_name):
        """Elements of a ``String[] NAME = { "a", "b" };`` initialiser."""
        source = self.find_class(class_name).source
        match = re.search(r"String\s*\[\]\s*%s\s*=\s*\{(.*?)\}\s*;" % re.escape(array_name), source, re.S)
        if not match:
            raise KeyError("%s has no String[] %s initialiser" % (class_name, array_name))
        return [ast.literal_eval(s) for s in re.findall(r'"(?:\\.|[^"\\])*"', match.group(1))]

    def enum_rows(self, class_name):
        """{constant: [argument values]} of a top-level enum's constants, e.g. ``FLOAT16(2, "float16", 2)``."""
        java_class = self.find_class(class_name)
        body = re.search(r"\benum\s+%s\b[^{]*\{((?:%s|[^;\"])*);" % (re.escape(java_class.name), _STRING),
                         java_class.source, re.S)
        if not body:
            raise KeyError("%s is not an enum" % class_name)
        rows = {}
        for name, arguments in re.findall(r"\b([A-Z][A-Z0-9_]*)\s*\(((?:%s|[^()\"]|\([^()]*\))*)\)" % _STRING,
                                          body.group(1)):
            parts = re.findall(r"(?:%s|\([^()]*\)|[^,\"()])+" % _STRING, arguments)
            rows[name] = [self.evaluate(p.strip(), java_class) for p in parts if p.strip()]
        return rows


def java_counter_names(java):
    """{counter id: name} of CountersDescriptor's named counters, whichever of its shapes the file has: rows
    ``ROW(CountersDescriptor.ID, "name", ...)``, assignments ``NAMES[ID] = "name";``, or a String[] copied into
    NAMES with ``System.arraycopy(array, 0, NAMES, FIRST, ...)``. The responses table is not included."""
    java_class = java.find_class("io.kvstash.wire.file.CountersDescriptor")
    source = java_class.source
    names = {}

    def put(counter_id, name, how):
        if names.get(counter_id, name) != name:
            raise AssertionError("CountersDescriptor names id %d both %r and %r (%s)"
                                 % (counter_id, names[counter_id], name, how))
        names[counter_id] = name

    for identifier, name in re.findall(r"\b[A-Z][A-Z0-9_]*\s*\(\s*((?:CountersDescriptor\.)?[A-Z][A-Z0-9_]*)\s*,"
                                       r"\s*\"([^\"]+)\"", source):
        put(java.resolve(identifier, java_class), name, "descriptor row")
    for identifier, name in re.findall(r"\bNAMES\s*\[\s*([A-Z][A-Z0-9_.]*)\s*\]\s*=\s*\"([^\"]+)\"\s*;", source):
        put(java.resolve(identifier, java_class), name, "NAMES assignment")
    for array, first in re.findall(r"System\.arraycopy\(\s*(\w+)\s*,\s*0\s*,\s*NAMES\s*,\s*(\w+)\s*,", source):
        block = re.search(r"String\s*\[\]\s*%s\s*=\s*\{(.*?)\}\s*;" % re.escape(array), source, re.S)
        if not block:
            raise AssertionError("CountersDescriptor copies %s into NAMES but its initialiser was not found" % array)
        start = java.evaluate(first, java_class)
        for k, literal in enumerate(re.findall(r'"(?:\\.|[^"\\])*"', block.group(1))):
            put(start + k, ast.literal_eval(literal), "array " + array)
    return names


def java_counter_table(java):
    """{counter id: name} of every counter CountersDescriptor names, the responses table
    ``requests.<type>.<status>`` included, as its static initialiser builds it: what the server writes into the
    control file's labels section."""
    names = java_counter_names(java)
    count, base = java.value("CountersDescriptor.COUNT"), java.value("CountersDescriptor.REQUESTS_BASE")
    types_, statuses = java.string_array("RequestType", "NAMES"), java.string_array("Status", "NAMES")
    for t, type_name in enumerate(types_):
        for k, status_name in enumerate(statuses):
            counter_id = base + t * len(statuses) + k
            if counter_id in names or counter_id >= count:
                raise AssertionError("the responses table's id %d is named or past COUNT" % counter_id)
            names[counter_id] = "requests.%s.%s" % (type_name.lower(), status_name.lower())
    return dict(sorted(names.items()))


def struct_offsets(layout):
    """Byte offset of every field of a struct.Struct (no repeat counts, standard sizes)."""
    fmt = layout.format if isinstance(layout, struct.Struct) else layout
    order, fields = fmt[0], fmt[1:]
    return [struct.calcsize(order + fields[:k]) for k in range(len(fields))]


# ------------------------------------------------------------------------------------------- the maps
WD = "WireDescriptor."
CFD = "ControlFileDescriptor."
PFD = "PoolFileDescriptor."
CLFD = "ClientFileDescriptor."
RD = "RingDescriptor."

# descriptor.py name -> Java constant, or an expression over Java constants (evaluated in the named class)
DESCRIPTOR_MAP = {
    "VERSION": "WireVersion.CURRENT",
    "MAJOR_VERSION": "WireVersion.MAJOR",
    "MINOR_VERSION": "WireVersion.MINOR",
    "NO_REPLY_MINOR": "WireVersion.NO_REPLY_MINOR",
    # control file (ControlFileDescriptor)
    "CONTROL_FILE_NAME": CFD + "FILE_NAME",
    "CONTROL_MAGIC": CFD + "MAGIC",
    "CONTROL_MIN_LENGTH": CFD + "COUNTERS_OFFSET",             # header + config: what a client maps first
    "CTL_MAGIC_OFFSET": CFD + "MAGIC_OFFSET",
    "CTL_VERSION_OFFSET": CFD + "VERSION_OFFSET",
    "CTL_HEADER_LENGTH_OFFSET": CFD + "HEADER_LENGTH_OFFSET",
    "CTL_PID_OFFSET": CFD + "PID_OFFSET",
    "CTL_INCARNATION_OFFSET": CFD + "INCARNATION_OFFSET",
    "CTL_START_TIME_OFFSET": CFD + "START_TIME_OFFSET",
    "CTL_HEARTBEAT_OFFSET": CFD + "HEARTBEAT_OFFSET",
    "CTL_STATE_OFFSET": CFD + "STATE_OFFSET",
    "CTL_CONFIG_OFFSET_OFFSET": CFD + "CONFIG_SECTION_OFFSET",
    "CTL_CONFIG_LENGTH_OFFSET": CFD + "CONFIG_SECTION_OFFSET + 4",
    "CTL_COUNTERS_OFFSET_OFFSET": CFD + "COUNTERS_SECTION_OFFSET",
    "CTL_COUNTERS_LENGTH_OFFSET": CFD + "COUNTERS_SECTION_OFFSET + 4",
    "CTL_ERROR_LOG_OFFSET_OFFSET": CFD + "ERROR_LOG_SECTION_OFFSET",
    "CTL_ERROR_LOG_LENGTH_OFFSET": CFD + "ERROR_LOG_SECTION_OFFSET + 4",
    "CTL_LABELS_OFFSET_OFFSET": CFD + "LABELS_SECTION_OFFSET",
    "CTL_LABELS_LENGTH_OFFSET": CFD + "LABELS_SECTION_OFFSET + 4",
    "CTL_ASLEEP_OFFSET": CFD + "ASLEEP_OFFSET",
    "STATE_RUNNING": CFD + "STATE_RUNNING",
    "STATE_CLOSED": CFD + "STATE_CLOSED",
    "CFG_POOL_FILE_NAME_LENGTH": CFD + "POOL_NAME_LENGTH_OFFSET",
    "CFG_POOL_FILE_NAME": CFD + "POOL_NAME_OFFSET",
    "CFG_POOL_FILE_NAME_MAX": CFD + "POOL_NAME_MAX_LENGTH",
    "CFG_POOL_DATA_BYTES": CFD + "POOL_SIZE_OFFSET",
    "CFG_DATA_OFFSET": CFD + "DATA_OFFSET_OFFSET",
    "CFG_SLOT_TABLE_OFFSET": CFD + "SLOT_TABLE_OFFSET_OFFSET",
    "CFG_SLOT_TABLE_LENGTH": CFD + "SLOT_TABLE_LENGTH_OFFSET",
    "CFG_SEGMENT_BYTES": CFD + "SEGMENT_BYTES_OFFSET",
    "CFG_ALIGNMENT": CFD + "ALIGNMENT_OFFSET",
    "CFG_CHUNK_TOKENS": CFD + "CHUNK_TOKENS_OFFSET",
    "CFG_LEASE_NS": CFD + "LEASE_NS_OFFSET",
    "CFG_MAX_CHUNKS": CFD + "MAX_CHUNKS_OFFSET",
    "CFG_MAX_INLINE_BYTES": CFD + "MAX_INLINE_OFFSET",
    "CFG_REQUEST_RING_CAPACITY": CFD + "REQUEST_RING_CAPACITY_OFFSET",
    "CFG_RESPONSE_RING_CAPACITY": CFD + "RESPONSE_RING_CAPACITY_OFFSET",
    "CFG_MAX_CLIENTS": CFD + "MAX_CLIENTS_OFFSET",
    "CFG_HEARTBEAT_INTERVAL_MS": CFD + "HEARTBEAT_INTERVAL_OFFSET",
    "CFG_HEARTBEAT_TIMEOUT_MS": CFD + "HEARTBEAT_TIMEOUT_OFFSET",
    "CFG_FEATURES": CFD + "FEATURES_OFFSET",
    "FEATURE_SECOND_TIER": CFD + "FEATURE_SECOND_TIER",
    "FEATURE_COMPLETED_TICKET": CFD + "FEATURE_COMPLETED_TICKET",
    "FEATURE_DOORBELL": CFD + "FEATURE_DOORBELL",
    "FEATURE_POOL_ON_DEMAND": CFD + "FEATURE_POOL_ON_DEMAND",
    "DOORBELL_FILE_NAME": CFD + "DOORBELL_FILE_NAME",
    "COUNTER_L2_COMPLETED_TICKET": "CountersDescriptor.L2_COMPLETED_TICKET",
    "COUNTER_POOL_BYTES_COMMITTED": "CountersDescriptor.POOL_BYTES_COMMITTED",
    # pool file (PoolFileDescriptor, SlotTableDescriptor)
    "POOL_MAGIC": PFD + "MAGIC",
    "POOL_HEADER_LENGTH": PFD + "HEADER_LENGTH",
    "POOL_MAGIC_OFFSET": PFD + "MAGIC_OFFSET",
    "POOL_VERSION_OFFSET": PFD + "VERSION_OFFSET",
    "POOL_INCARNATION_OFFSET": PFD + "INCARNATION_OFFSET",
    "POOL_DATA_BYTES_OFFSET": PFD + "POOL_SIZE_OFFSET",
    "POOL_DATA_OFFSET_OFFSET": PFD + "DATA_OFFSET_OFFSET",
    "POOL_SLOT_TABLE_OFFSET_OFFSET": PFD + "SLOT_TABLE_OFFSET_OFFSET",
    "POOL_SLOT_TABLE_LENGTH_OFFSET": PFD + "SLOT_TABLE_LENGTH_OFFSET",
    "POOL_SEGMENT_BYTES_OFFSET": PFD + "SEGMENT_BYTES_OFFSET",
    "POOL_ALIGNMENT_OFFSET": PFD + "ALIGNMENT_OFFSET",
    "SLOT_FREE": "SlotTableDescriptor.STATE_FREE",
    "SLOT_RESERVED": "SlotTableDescriptor.STATE_RESERVED",
    "SLOT_READABLE": "SlotTableDescriptor.STATE_READABLE",
    # client file (ClientFileDescriptor)
    "CLIENT_FILE_PREFIX": CLFD + "FILE_PREFIX",
    "CLIENT_MAGIC": CLFD + "MAGIC",
    "CLIENT_HEADER_LENGTH": CLFD + "HEADER_LENGTH",
    "CLI_MAGIC_OFFSET": CLFD + "MAGIC_OFFSET",
    "CLI_VERSION_OFFSET": CLFD + "VERSION_OFFSET",
    "CLI_HEADER_LENGTH_OFFSET": CLFD + "HEADER_LENGTH_OFFSET",
    "CLI_PID_OFFSET": CLFD + "PID_OFFSET",
    "CLI_INCARNATION_OFFSET": CLFD + "INCARNATION_OFFSET",
    "CLI_REQUEST_CAPACITY_OFFSET": CLFD + "REQUEST_CAPACITY_OFFSET",
    "CLI_RESPONSE_CAPACITY_OFFSET": CLFD + "RESPONSE_CAPACITY_OFFSET",
    "CLI_FLAGS_OFFSET": CLFD + "FLAGS_OFFSET",
    "CLI_ATTACH_STATE_OFFSET": CLFD + "ATTACH_STATE_OFFSET",
    "CLI_REJECT_REASON_OFFSET": CLFD + "REJECT_REASON_OFFSET",
    "CLI_SESSION_ID_OFFSET": CLFD + "SESSION_ID_OFFSET",
    "CLI_CLOSING_OFFSET": CLFD + "CLOSING_OFFSET",
    "CLI_REQUEST_RING_OFFSET": CLFD + "REQUEST_RING_OFFSET",
    "CLIENT_FLAG_COPY_TRANSPORT": CLFD + "FLAG_COPY_TRANSPORT",
    "ATTACH_PENDING": CLFD + "ATTACH_PENDING",
    "ATTACH_ATTACHED": CLFD + "ATTACH_ATTACHED",
    "ATTACH_REJECTED": CLFD + "ATTACH_REJECTED",
    "ATTACH_DETACHED": CLFD + "ATTACH_DETACHED",
    # rings (RingDescriptor) and records (WireDescriptor)
    "RING_HEADER_LENGTH": RD + "HEADER_LENGTH",
    "RING_TAIL_OFFSET": RD + "TAIL_POSITION_OFFSET",
    "RING_HEAD_OFFSET": RD + "HEAD_POSITION_OFFSET",
    "RECORD_HEADER_LENGTH": RD + "RECORD_HEADER_LENGTH",
    "PADDING_TYPE": RD + "PADDING_TYPE",
    "RESPONSE_TYPE": WD + "RESPONSE_TYPE",
    "REQUEST_HEADER_LENGTH": WD + "REQUEST_HEADER_LENGTH",
    "RESPONSE_HEADER_LENGTH": WD + "RESPONSE_HEADER_LENGTH",
    "SLOT_ENTRY_LENGTH": WD + "SLOT_ENTRY_LENGTH",
    "DATA_BODY_LENGTH": WD + "DATA_HEADER_LENGTH",
    "KEY_MODE_NONE": WD + "KEY_MODE_NONE",
    "KEY_MODE_HASHES": WD + "KEY_MODE_HASHES",
    "KEY_MODE_TOKENS": WD + "KEY_MODE_TOKENS",
    "FLAG_PIN": "RequestFlags.PIN",
    "FLAG_FORCE": "RequestFlags.FORCE",
    "FLAG_FROM_LOOKUP": "RequestFlags.FROM_LOOKUP",
    "FLAG_L2_WAIT": "RequestFlags.L2_WAIT",
    "FLAG_L2_POLL": "RequestFlags.L2_POLL",
    "FLAG_QUIET": "RequestFlags.QUIET",
    "FLAG_PREFIX": "RequestFlags.PREFIX",
    "FLAG_NO_REPLY": "RequestFlags.NO_REPLY",
    "LOOKUP_TIER_TICKET": "ResponseFlyweight.LOOKUP_TIER_TICKET_OFFSET",
    "LOOKUP_TIER_COMPLETED": "ResponseFlyweight.LOOKUP_TIER_COMPLETED_OFFSET",
    "LOOKUP_TIER_EXTRA_LENGTH": "ResponseFlyweight.LOOKUP_TIER_EXTRA_LENGTH",
    "MAX_MODEL_LENGTH": "Layout.MAX_MODEL_LENGTH",
    "MAX_WORLD_SIZE": "Layout.MAX_WORLD_SIZE",
    # counter labels (ControlFileDescriptor)
    "COUNTER_LABEL_LENGTH": CFD + "COUNTER_LABEL_LENGTH",
    "COUNTER_LABEL_LENGTH_OFFSET": CFD + "COUNTER_LABEL_LENGTH_OFFSET",
    "COUNTER_LABEL_OFFSET": CFD + "COUNTER_LABEL_OFFSET",
    "COUNTER_LABEL_MAX_LENGTH": CFD + "COUNTER_LABEL_MAX_LENGTH",
}

# descriptor.py names that have no Java constant, with the reason (every other UPPER_CASE name must be mapped)
UNMAPPED = {
    "MASK64": "Python masking helper",
    "MASK32": "Python masking helper",
    "REJECT_REASONS": "checked against ClientFileDescriptor.REJECT_* in test_should_name_every_reject_reason",
    # struct formats, checked in StructLayoutTest
    "REQUEST_HEADER": "", "RESPONSE_HEADER": "", "SLOT_ENTRY": "", "REGISTER_BODY": "", "DATA_BODY": "",
    "KEYS_HASHES_HEADER": "", "KEYS_TOKENS_HEADER": "", "ALL_RANKS_HEADER": "", "LOOKUP_TIER_EXTRA": "",
}


def java_expression(sources, reference):
    """Value of ``Class.CONSTANT`` or of ``Class.CONSTANT <op> ...`` evaluated in that class."""
    head = reference.split()[0]
    if head == reference:
        return sources.value(reference)
    class_name, _, first = head.rpartition(".")
    java_class = sources.find_class(class_name)
    return sources.evaluate(first + reference[len(head):], java_class)


_sources = None


def sources():
    global _sources
    if _sources is None:
        _sources = JavaSources(WIRE_SOURCES)
    return _sources


# ------------------------------------------------------------------------------------------- the tests
_READER_SAMPLE = {
    "a/Base.java": """package a;
        import org.agrona.SemanticVersion;
        public class Base
        {
            /** a comment with = 99; in it */
            public static final int HEADER_LENGTH = 40; // trailing = 1;
            public static final long BIG = 0x7FFF_FFFFL + (1 << 31);
            public static final int WRAPPED = 1 << 31;
            public static final long MASKED = 1 << 40;
            static final int VERSION = SemanticVersion.compose(2, 7, 9);
            public static final String NAME = "con;trol";
        }""",
    "a/b/Child.java": """package a.b;
        import a.Base;
        import static a.b.Table.*;
        public final class Child extends Base
        {
            private static final int BODY = HEADER_LENGTH + ROW * 4;
            public static final long SEGMENT = 1L << 30;
            public static final int MASK = Base.HEADER_LENGTH | 3 & ~1;
            public static final int LENGTH = (int)(SEGMENT >>> 20) / 2 - Long.BYTES;
        }""",
    "a/b/Table.java": """package a.b;
        public enum Table
        {
            FIRST(1, "first", 4),
            SECOND(Table.ROW, "se,cond", 2 * 3);
            public static final int ROW = 12;
            private static final String[] NAMES = { "FIRST", "SECOND" };
            Table(final int code, final String name, final int size) { }
        }""",
}


class JavaReaderTest(unittest.TestCase):
    """The reader itself, on a sample of the expression forms the contract uses."""

    @classmethod
    def setUpClass(cls):
        import tempfile
        cls.folder = tempfile.mkdtemp(prefix="kvstash-java-reader-")
        for path, text in _READER_SAMPLE.items():
            os.makedirs(os.path.join(cls.folder, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(cls.folder, path), "w") as f:
                f.write(text)
        cls.java = JavaSources(cls.folder)

    @classmethod
    def tearDownClass(cls):
        import shutil
        shutil.rmtree(cls.folder, ignore_errors=True)

    def test_should_evaluate_literals_shifts_and_references(self):
        j = self.java
        self.assertEqual(j.value("Base.HEADER_LENGTH"), 40)
        self.assertEqual(j.value("Base.BIG"), 0x7FFFFFFF - (1 << 31))          # int shift overflows first
        self.assertEqual(j.value("Base.WRAPPED"), -(1 << 31))
        self.assertEqual(j.value("Base.MASKED"), 1 << 8)                         # int shift distance & 31
        self.assertEqual(j.value("Base.VERSION"), 0x00020709)
        self.assertEqual(j.value("Base.NAME"), "con;trol")
        self.assertEqual(j.value("Child.BODY"), 40 + 12 * 4)                    # superclass, static import
        self.assertEqual(j.value("a.b.Child.SEGMENT"), 1 << 30)
        self.assertEqual(j.value("Child.MASK"), 40 | (3 & ~1))
        self.assertEqual(j.value("Child.LENGTH"), 1024 // 2 - 8)
        self.assertEqual(j.public_constants("Child"), {"SEGMENT": 1 << 30, "MASK": 42, "LENGTH": 504})
        self.assertEqual(j.enum_rows("Table"), {"FIRST": [1, "first", 4], "SECOND": [12, "se,cond", 6]})
        self.assertEqual(j.string_array("Table", "NAMES"), ["FIRST", "SECOND"])

    def test_should_fail_on_a_missing_constant(self):
        with self.assertRaises(KeyError):
            self.java.value("Base.NO_SUCH_CONSTANT")
        with self.assertRaises(KeyError):
            sources().value("WireDescriptor.NO_SUCH_CONSTANT")

    def test_should_read_the_real_sources(self):
        s = sources()
        self.assertEqual(s.value(CFD + "COUNTERS_OFFSET"),
                         s.value(CFD + "HEADER_LENGTH") + s.value(CFD + "CONFIG_LENGTH"))
        self.assertEqual(s.value("PoolFileDescriptor.SEGMENT_BYTES"), s.value("SlotGeometry.SEGMENT_BYTES"))
        self.assertEqual(s.value("WireVersion.CURRENT"),
                         _calls_compose(*(s.value("WireVersion." + p) for p in ("MAJOR", "MINOR", "PATCH"))))


class DescriptorConstantsTest(unittest.TestCase):
    """descriptor.py, constant by constant, against the wire module."""
    maxDiff = None

    def test_should_match_every_mapped_java_constant(self):
        s = sources()
        missing, differing = [], []
        for python_name, reference in sorted(DESCRIPTOR_MAP.items()):
            try:
                expected = java_expression(s, reference)
            except KeyError as e:
                missing.append("%s -> %s: %s" % (python_name, reference, e))
                continue
            actual = getattr(d, python_name)
            if actual != expected:
                differing.append("%s = %r, Java %s = %r" % (python_name, actual, reference, expected))
        self.assertEqual(missing, [], "mapped Java constants missing")
        self.assertEqual(differing, [], "values differ")

    def test_should_map_every_descriptor_constant(self):
        names = {n for n in vars(d) if re.fullmatch(r"[A-Z][A-Z0-9_]*", n)}
        unmapped = sorted(names - set(DESCRIPTOR_MAP) - set(UNMAPPED))
        self.assertEqual(unmapped, [], "descriptor.py constants with no Java counterpart in DESCRIPTOR_MAP")
        stale = sorted((set(DESCRIPTOR_MAP) | set(UNMAPPED)) - names)
        self.assertEqual(stale, [], "map entries for names descriptor.py no longer has")

    def test_should_have_a_flag_for_every_flag_a_client_may_send(self):
        # Every single-bit constant of RequestFlags inside CLIENT_MASK is a FLAG_<name> of descriptor.py, and the
        # FLAG_ constants together are exactly CLIENT_MASK (a flag added in Java and not here fails this).
        java = sources().public_constants("io.kvstash.wire.RequestFlags")
        mask = java["CLIENT_MASK"]
        client_flags = {name: value for name, value in java.items()
                        if value > 0 and value & (value - 1) == 0 and value & mask}
        python = {name[len("FLAG_"):]: value for name, value in vars(d).items() if name.startswith("FLAG_")}
        self.assertEqual(python, client_flags)
        combined = 0
        for value in python.values():
            combined |= value
        self.assertEqual(combined, mask)
        self.assertNotIn("REAPED", python, "the server's own flag is never sent")

    def test_should_unpack_the_version_as_the_server_packs_it(self):
        s = sources()
        current = s.value("WireVersion.CURRENT")
        self.assertEqual(d.major(current), s.value("WireVersion.MAJOR"))
        self.assertEqual(d.minor(current), s.value("WireVersion.MINOR"))
        for major, minor, patch in ((1, 0, 0), (2, 7, 9), (255, 255, 255)):
            packed = _calls_compose(major, minor, patch)
            self.assertEqual(d.major(packed), major)
            self.assertEqual(d.minor(packed), minor)

    def test_should_name_every_reject_reason(self):
        rejects = {name[len("REJECT_"):]: value
                   for name, value in sources().public_constants("ClientFileDescriptor").items()
                   if name.startswith("REJECT_") and not name.endswith("_OFFSET")}
        self.assertTrue(rejects)
        self.assertEqual(sorted(d.REJECT_REASONS), sorted(rejects.values()))
        for reason, value in rejects.items():
            self.assertTrue(d.REJECT_REASONS[value].startswith(reason + " "), (reason, d.REJECT_REASONS[value]))

    def test_should_lay_out_the_client_file_as_the_server_does(self):
        # ClientFileDescriptor.responseRingOffset / fileLength and RingDescriptor.totalLength, over Java constants
        s = sources()
        ring = s.value(RD + "HEADER_LENGTH")
        first = s.value(CLFD + "REQUEST_RING_OFFSET")
        for request, response in ((1024, 1024), (1 << 21, 1 << 16)):
            self.assertEqual(d.response_ring_offset(request), first + ring + request)
            self.assertEqual(d.client_file_length(request, response), first + ring + request + ring + response)

    def test_should_accept_the_ring_capacities_the_server_accepts(self):
        s = sources()
        minimum = s.value(RD + "MIN_CAPACITY")
        view = memoryview(bytearray(s.value(RD + "HEADER_LENGTH") + 2 * minimum))
        ring = Ring(view, 0, minimum)
        self.assertEqual(ring.max_payload, minimum // 2 - s.value(RD + "RECORD_HEADER_LENGTH"))   # maxPayloadLength
        for capacity in (minimum // 2, minimum + minimum // 2):
            with self.assertRaises(ValueError):
                Ring(view, 0, capacity)


class EnumsTest(unittest.TestCase):
    """Request types, statuses and dtypes: same names, same codes, nothing missing on either side."""
    maxDiff = None

    def _check_codes(self, python_enum, class_name):
        java = sources().public_constants(class_name)
        count = java.pop("COUNT")
        self.assertEqual({m.name: m.value for m in python_enum}, java)
        self.assertEqual(len(python_enum), count)
        self.assertEqual(sorted(java.values()), list(range(count)), "codes dense in [0, COUNT)")
        self.assertEqual(sources().string_array(class_name, "NAMES"), [python_enum(c).name for c in range(count)])

    def test_should_have_every_request_type(self):
        self._check_codes(RequestType, "io.kvstash.wire.RequestType")

    def test_should_have_every_status(self):
        self._check_codes(Status, "io.kvstash.wire.Status")

    def test_should_have_every_dtype(self):
        rows = sources().enum_rows("io.kvstash.wire.layout.Dtype")
        self.assertTrue(rows)
        self.assertEqual({m.name: [m.value, str(m), m.item_bytes] for m in Dtype}, rows)


class CountersTest(unittest.TestCase):
    """The client names counters by the control file's labels (§2.3): the section as the server writes it from
    CountersDescriptor, read back by the client (a real server's labels: test_client's CounterLabelsTest)."""
    maxDiff = None

    def test_should_read_every_name_of_the_table_from_a_labels_section_written_as_the_server_does(self):
        s = sources()
        table = java_counter_table(s)
        self.assertGreater(len(table), 200, "CountersDescriptor names not found: has the file changed shape?")
        count = s.value("CountersDescriptor.COUNT")
        section = bytearray(count * d.COUNTER_LABEL_LENGTH)
        for counter_id, name in table.items():
            label = name.encode("utf-8")
            self.assertLessEqual(len(label), d.COUNTER_LABEL_MAX_LENGTH, name)
            record = counter_id * d.COUNTER_LABEL_LENGTH
            struct.pack_into("<i", section, record + d.COUNTER_LABEL_LENGTH_OFFSET, len(label))
            section[record + d.COUNTER_LABEL_OFFSET:record + d.COUNTER_LABEL_OFFSET + len(label)] = label
        struct.pack_into("<i", section, (count - 1) * d.COUNTER_LABEL_LENGTH, d.COUNTER_LABEL_MAX_LENGTH + 1)

        labels = read_counter_labels(memoryview(section), count)
        self.assertEqual(labels, table, "every label, and none for unused ids or a damaged record")
        self.assertEqual(read_counter_labels(memoryview(section), 64), {i: n for i, n in table.items() if i < 64},
                         "no more ids than the file has counters")
        values = list(range(count))
        python = Client.counters(types.SimpleNamespace(_counters=values, _counter_labels=labels))
        self.assertEqual(python, {name: counter_id for counter_id, name in table.items()})


class StructLayoutTest(unittest.TestCase):
    """struct formats of descriptor.py (and the client's REGISTER extra): sizes and field offsets."""
    maxDiff = None

    def _check(self, layout, length, field_offsets, base=0):
        s = sources()
        self.assertEqual(layout.size, java_expression(s, length), "%s size vs %s" % (layout.format, length))
        expected = [java_expression(s, f) - base for f in field_offsets]
        self.assertEqual(struct_offsets(layout), expected, layout.format)

    def test_should_lay_out_the_request_header(self):
        self._check(d.REQUEST_HEADER, WD + "REQUEST_HEADER_LENGTH",
                    [WD + f for f in ("CORRELATION_ID_OFFSET", "INSTANCE_ID_OFFSET", "TRANSFER_ID_OFFSET",
                                      "SALT_OFFSET", "FLAGS_OFFSET", "KEY_MODE_OFFSET")])

    def test_should_lay_out_the_response_header(self):
        self._check(d.RESPONSE_HEADER, WD + "RESPONSE_HEADER_LENGTH",
                    [WD + "RESPONSE_" + f for f in ("CORRELATION_ID_OFFSET", "STATUS_OFFSET", "TYPE_OFFSET",
                                                    "TRANSFER_ID_OFFSET", "HIT_CHUNKS_OFFSET", "SLOT_COUNT_OFFSET",
                                                    "COUNT_OFFSET", "CHUNK_BYTES_OFFSET", "SLOT_BYTES_OFFSET",
                                                    "SLOT_CAPACITY_OFFSET", "EXTRA_LENGTH_OFFSET")])
        self.assertEqual(d.RESPONSE_HEADER.size, sources().value("ResponseFlyweight.HEADER_LENGTH"))

    def test_should_lay_out_a_slot_entry(self):
        # ResponseFlyweight reads range index, generation and offset at +0, +4, +8 of an entry (no constants)
        self.assertEqual(d.SLOT_ENTRY.size, sources().value(WD + "SLOT_ENTRY_LENGTH"))
        self.assertEqual(struct_offsets(d.SLOT_ENTRY), [0, 4, 8])

    def test_should_lay_out_the_register_body(self):
        self._check(d.REGISTER_BODY, WD + "REGISTER_BODY_LENGTH",
                    ["RegisterRequestFlyweight." + f for f in (
                        "WORLD_SIZE_OFFSET", "RANK_OFFSET", "LAYERS_OFFSET", "HIDDEN_OFFSET", "DTYPE_OFFSET",
                        "MLA_OFFSET", "MODEL_LENGTH_OFFSET", "RESERVED_OFFSET")],
                    base=sources().value("RequestFlyweight.HEADER_LENGTH"))
        self.assertEqual(sources().value("RegisterRequestFlyweight.MODEL_OFFSET"),
                         d.REQUEST_HEADER.size + d.REGISTER_BODY.size)

    def test_should_lay_out_the_data_body(self):
        self._check(d.DATA_BODY, WD + "DATA_HEADER_LENGTH",
                    ["DataRequestFlyweight." + f for f in ("SLOT_INDEX_OFFSET", "DATA_LENGTH_OFFSET",
                                                           "CHUNK_OFFSET_OFFSET")],
                    base=sources().value("RequestFlyweight.HEADER_LENGTH"))
        self.assertEqual(sources().value("DataRequestFlyweight.READ_LENGTH"), d.REQUEST_HEADER.size + d.DATA_BODY.size)

    def test_should_lay_out_the_key_range_headers(self):
        self.assertEqual(d.KEYS_HASHES_HEADER.size, sources().value(WD + "HASHES_HEADER_LENGTH"))
        self.assertEqual(d.KEYS_TOKENS_HEADER.size, sources().value(WD + "TOKENS_HEADER_LENGTH"))
        header = sources().value("RequestFlyweight.HEADER_LENGTH")
        self._check(d.ALL_RANKS_HEADER, "KeyedRequestFlyweight.ALL_RANKS_MODEL_OFFSET - " + str(header),
                    ["KeyedRequestFlyweight.ALL_RANKS_WORLD_SIZE_OFFSET",
                     "KeyedRequestFlyweight.ALL_RANKS_MODEL_LENGTH_OFFSET"], base=header)

    def test_should_encode_key_ranges_of_the_lengths_the_server_decodes(self):
        # KeyedRequestFlyweight.hashesLength / tokensLength less the common header
        s = sources()
        hash_length = s.value("KeyedRequestFlyweight.HASH_LENGTH")
        mode, body = key_range([(1, 2), (3, 4), (5, 6)], None, 0, -1)
        self.assertEqual(mode, s.value(WD + "KEY_MODE_HASHES"))
        self.assertEqual(len(body), s.value(WD + "HASHES_HEADER_LENGTH") + 3 * hash_length)
        mode, body = key_range(bytes(2 * hash_length), None, 0, -1)
        self.assertEqual(struct.unpack_from("<i", body)[0], 2)
        mode, body = key_range(None, list(range(10)), 0, -1)
        self.assertEqual(mode, s.value(WD + "KEY_MODE_TOKENS"))
        self.assertEqual(len(body), s.value(WD + "TOKENS_HEADER_LENGTH") + 10 * 4)
        self.assertEqual(key_range(None, None, 0, -1), (s.value(WD + "KEY_MODE_NONE"), b""))

    def test_should_read_the_lookup_tier_extra_where_the_server_writes_it(self):
        self._check(d.LOOKUP_TIER_EXTRA, "ResponseFlyweight.LOOKUP_TIER_EXTRA_LENGTH",
                    ["ResponseFlyweight.LOOKUP_TIER_TICKET_OFFSET", "ResponseFlyweight.LOOKUP_TIER_COMPLETED_OFFSET"])

    def test_should_read_the_register_extra_where_the_server_writes_it(self):
        s = sources()
        layout = REGISTER_EXTRA
        self.assertEqual(layout.size, s.value("ResponseFlyweight.REGISTER_NAME_OFFSET"))
        self.assertEqual(struct_offsets(layout),
                         [s.value("ResponseFlyweight.REGISTER_" + f) for f in (
                             "INCARNATION_OFFSET", "POOL_BYTES_OFFSET", "LEASE_NS_OFFSET", "CHUNK_TOKENS_OFFSET",
                             "NAME_LENGTH_OFFSET")])


if __name__ == "__main__":
    unittest.main()

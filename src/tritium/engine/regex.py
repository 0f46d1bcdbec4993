"""Regular expressions compiled to DFAs over bytes: what a schema's ``pattern`` (and the string ``format`` s
expressed as patterns) constrains in JSON mode, and what a regex-guided answer (``text=True``:
:mod:`tritium.engine.guided`) must match in full.

The alphabet is printable ASCII without the quote and the backslash (``ALPHABET``): a string matched this way
is written byte for byte, with no escape, so the grammar steps the DFA on the JSON text itself. Characters
outside it (non-ASCII, control characters, ``"`` and ``\\``) are never generated; a pattern that needs one to
match anything is refused. With ``text=True`` the alphabet is ``TEXT`` (printable ASCII, tab, newline and
carriage return; ``.`` all of it but the newline, as in Python), escapes ``\\t \\n \\r`` stand for those bytes,
and a non-ASCII character written in the pattern matches its UTF-8 bytes (not inside a class).

Syntax (ECMAScript's, which JSON Schema uses, in part): literals, ``.``, classes ``[a-z0-9_]`` / ``[^...]``,
``\\d \\D \\w \\W \\s \\S`` and escaped punctuation, groups ``(...)`` / ``(?:...)``, alternation ``|``,
quantifiers ``* + ? {n} {n,} {n,m}`` (a lazy ``?`` after one is accepted: it changes no match), ``^`` at the
start and ``$`` at the end. As in JSON Schema, a pattern is not anchored: without ``^`` any text may come
before the match, without ``$`` any text after it. Backreferences, lookaround, ``\\b`` and other escapes are
refused by name (ValueError), as are patterns whose DFA would exceed ``MAX_STATES`` states.

:func:`compile_pattern` returns a :class:`Dfa`: ``step(state, byte)`` (None where the byte cannot follow or
leads nowhere a match can still end), ``accepting(state)``, ``start``. Every state it gives can still reach a
match (dead states are pruned), so a generator following it never gets stuck.
"""

from __future__ import annotations

import dataclasses

ALPHABET = frozenset(b for b in range(0x20, 0x7F) if b not in (0x22, 0x5C))
TEXT = frozenset([*range(0x20, 0x7F), *b"\t\n\r"])  # what a regex-guided answer is written in
_TEXT_ESCAPES = {"t": 0x09, "n": 0x0A, "r": 0x0D}
_DIGITS = frozenset(b"0123456789")
_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_SPACE = frozenset(b" ")  # of \s's characters, the only one written unescaped
_CLASSES = {"d": _DIGITS, "w": _WORD, "s": _SPACE}
MAX_STATES = 2048
MAX_NFA = 20000
MAX_REPEAT = 256


@dataclasses.dataclass(frozen=True)
class Dfa:
    """``table[state]``: {byte: next state}; ``accept``: the accepting states; ``start``: 0."""

    table: tuple
    accept: frozenset
    start: int = 0

    def step(self, state: int, b: int) -> int | None:
        return self.table[state].get(b)

    def accepting(self, state: int) -> bool:
        return state in self.accept


class _Parser:
    """Pattern text -> a tree: ("chars", set) | ("cat", [..]) | ("alt", [..]) | ("rep", node, lo, hi|None);
    ``text``: over ``TEXT`` (else ``ALPHABET``)."""

    def __init__(self, pattern: str, text: bool = False):
        self.p = pattern
        self.i = 0
        self.text = text
        self.alphabet = TEXT if text else ALPHABET

    def error(self, what: str) -> ValueError:
        return ValueError(f"pattern {self.p!r}: {what} (at {self.i})")

    def peek(self) -> str | None:
        return self.p[self.i] if self.i < len(self.p) else None

    def parse(self):
        node = self.alternation()
        if self.i != len(self.p):
            raise self.error(f"unexpected {self.p[self.i]!r}")
        return node

    def alternation(self):
        branches = [self.concatenation()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.concatenation())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def concatenation(self):
        items = []
        while self.peek() not in (None, "|", ")"):
            items.append(self.quantified(self.atom()))
        return ("cat", items)

    def quantified(self, atom):
        while True:
            c = self.peek()
            if c in ("*", "+", "?"):
                self.i += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            elif c == "{" and self._counted():
                lo, hi = self._counts()
            else:
                return atom
            if self.peek() == "?":  # lazy: the same strings match
                self.i += 1
            if self.peek() in ("*", "+", "?") or (self.peek() == "{" and self._counted()):
                raise self.error("nothing to repeat: a quantifier follows a quantifier")
            if hi is not None and hi < lo:
                raise self.error(f"quantifier {{{lo},{hi}}} has its maximum below its minimum")
            if lo > MAX_REPEAT or (hi or 0) > MAX_REPEAT:
                raise self.error(f"a repeat count above {MAX_REPEAT}")
            atom = ("rep", atom, lo, hi)

    def _counted(self) -> bool:
        j = self.p.find("}", self.i)
        body = self.p[self.i + 1: j] if j > 0 else ""
        head, _, tail = body.partition(",")
        return bool(head.isdigit() and (tail == "" or tail.isdigit()))

    def _counts(self) -> tuple[int, int | None]:
        j = self.p.index("}", self.i)
        body = self.p[self.i + 1: j]
        self.i = j + 1
        head, comma, tail = body.partition(",")
        return int(head), (int(head) if not comma else int(tail) if tail else None)

    def atom(self):
        c = self.peek()
        if c is None:
            raise self.error("a pattern ends where an atom is expected")
        self.i += 1
        if c == "(":
            if self.p.startswith("?:", self.i):
                self.i += 2
            elif self.peek() == "?":
                raise self.error("lookaround and named groups are not supported")
            node = self.alternation()
            if self.peek() != ")":
                raise self.error("an unclosed group")
            self.i += 1
            return node
        if c == "[":
            return ("chars", self.char_class())
        if c == ".":
            return ("chars", self.alphabet - {0x0A})
        if c == "\\":
            return ("chars", self.escape())
        if c in "*+?" or (c == "{" and self._counted_at(self.i - 1)):
            raise self.error(f"nothing to repeat before {c!r}")
        if c in "^$":
            raise self.error(f"{c!r} only at the start / end of the pattern")
        if c == ")":
            raise self.error("an unopened group")
        if self.text and ord(c) > 0x7F:  # its UTF-8 bytes, one after the other
            return ("cat", [("chars", frozenset((b,))) for b in c.encode()])
        return ("chars", frozenset((ord(c),)) & self.alphabet)

    def _counted_at(self, i: int) -> bool:
        save, self.i = self.i, i
        try:
            return self._counted()
        finally:
            self.i = save

    def escape(self) -> frozenset:
        c = self.peek()
        if c is None:
            raise self.error("a pattern ends in a backslash")
        self.i += 1
        if c in _CLASSES:
            return self._class(c)
        if c.lower() in _CLASSES:
            return self.alphabet - self._class(c.lower())
        if self.text and c in _TEXT_ESCAPES:
            return frozenset((_TEXT_ESCAPES[c],))
        if c in "tnrfv0":
            return frozenset()  # control characters: never written unescaped
        if c.isalnum():
            raise self.error(f"the escape \\{c} is not supported")
        return frozenset((ord(c),)) & self.alphabet

    def _class(self, c: str) -> frozenset:
        """\\d, \\w or \\s in this alphabet (\\s: with TEXT, tab, newline and carriage return too)."""
        return _CLASSES[c] | (frozenset(b"\t\n\r") & self.alphabet if c == "s" else frozenset())

    def char_class(self) -> frozenset:
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        chars: set[int] = set()
        first = True
        while True:
            c = self.peek()
            if c is None:
                raise self.error("an unclosed character class")
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            lo = self._class_atom()
            if self.peek() == "-" and self.p[self.i + 1: self.i + 2] not in ("]", ""):
                self.i += 1
                hi = self._class_atom()
                if not (isinstance(lo, int) and isinstance(hi, int)) or hi < lo:
                    raise self.error("a bad range in a character class")
                chars.update(range(lo, hi + 1))
            else:
                chars.update((lo,) if isinstance(lo, int) else lo)
        if self.text and any(ch > 0x7F for ch in chars):
            raise self.error("a non-ASCII character in a character class is not supported")
        return (self.alphabet - chars) if negate else (frozenset(chars) & self.alphabet)

    def _class_atom(self):
        c = self.peek()
        self.i += 1
        if c == "\\":
            got = self.escape()
            return next(iter(got)) if len(got) == 1 else got
        return ord(c)


def _nfa(tree) -> tuple[list, int, int]:
    """Thompson's construction: (edges, start, end); edges[s] = [(charset or None for epsilon, target)]."""
    edges: list[list] = []

    def new() -> int:
        if len(edges) >= MAX_NFA:
            raise ValueError(f"pattern: more than {MAX_NFA} automaton states (repeat counts too large)")
        edges.append([])
        return len(edges) - 1

    def build(node) -> tuple[int, int]:
        kind = node[0]
        s = new()
        if kind == "chars":
            e = new()
            if node[1]:
                edges[s].append((node[1], e))
            return s, e
        if kind == "cat":
            cur = s
            for item in node[1]:
                a, b = build(item)
                edges[cur].append((None, a))
                cur = b
            return s, cur
        if kind == "alt":
            e = new()
            for branch in node[1]:
                a, b = build(branch)
                edges[s].append((None, a))
                edges[b].append((None, e))
            return s, e
        _, sub, lo, hi = node  # rep
        cur = s
        for _ in range(lo):
            a, b = build(sub)
            edges[cur].append((None, a))
            cur = b
        if hi is None:
            a, b = build(sub)
            edges[cur].append((None, a))
            edges[b].append((None, a))
            e = new()
            edges[cur].append((None, e))
            edges[b].append((None, e))
            return s, e
        e = new()
        edges[cur].append((None, e))
        for _ in range(hi - lo):
            a, b = build(sub)
            edges[cur].append((None, a))
            edges[b].append((None, e))
            cur = b
        return s, e

    start, end = build(tree)
    return edges, start, end


def compile_pattern(pattern: str, text: bool = False) -> Dfa:
    """``pattern`` (see the module docstring) -> its DFA over ``ALPHABET``, anchored as JSON Schema reads it;
    ``text``: over ``TEXT``, matched in full (``^`` and ``$`` change nothing then)."""
    if not isinstance(pattern, str):
        raise ValueError(f"pattern must be a string, got {pattern!r}")
    starts = pattern.startswith("^")
    body = pattern[starts:]
    ends = body.endswith("$") and not body.endswith("\\$")
    body = body[:len(body) - ends]
    anchored_start, anchored_end = starts or text, ends or text
    tree = _Parser(body, text).parse()
    anything = ("rep", ("chars", ALPHABET), 0, None)
    tree = ("cat", ([] if anchored_start else [anything]) + [tree] + ([] if anchored_end else [anything]))
    edges, start, end = _nfa(tree)

    def closure(states) -> frozenset:
        seen, todo = set(states), list(states)
        while todo:
            for chars, t in edges[todo.pop()]:
                if chars is None and t not in seen:
                    seen.add(t)
                    todo.append(t)
        return frozenset(seen)

    first = closure([start])
    index, sets, table = {first: 0}, [first], []
    while len(table) < len(sets):
        current = sets[len(table)]
        moves: dict[int, set] = {}
        for s in current:
            for chars, t in edges[s]:
                if chars is not None:
                    for b in chars:
                        moves.setdefault(b, set()).add(t)
        row = {}
        for b, targets in moves.items():
            nxt = closure(targets)
            if nxt not in index:
                if len(sets) >= MAX_STATES:
                    raise ValueError(f"pattern {pattern!r}: more than {MAX_STATES} DFA states")
                index[nxt] = len(sets)
                sets.append(nxt)
            row[b] = index[nxt]
        table.append(row)
    accept = {i for i, st in enumerate(sets) if end in st}
    live = set(accept)  # states from which a match can still end
    changed = True
    while changed:
        changed = False
        for i, row in enumerate(table):
            if i not in live and any(t in live for t in row.values()):
                live.add(i)
                changed = True
    if 0 not in live:
        raise ValueError(f"pattern {pattern!r} matches no string of printable ASCII characters" + (
            ", tabs and line breaks" if text else " other than the quote and the backslash (what JSON mode writes "
            "unescaped)"))
    return Dfa(tuple({b: t for b, t in row.items() if t in live} for row in table), frozenset(accept))


# string formats as patterns (JSON Schema's date-time / date / time are RFC 3339's)
_DATE = r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
_TIME = r"([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d{1,9})?(Z|z|[+-]([01]\d|2[0-3]):[0-5]\d)"
_OCTET = r"(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
FORMATS = {
    "date": f"^{_DATE}$",
    "time": f"^{_TIME}$",
    "date-time": f"^{_DATE}[Tt]{_TIME}$",
    "uuid": r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
    "ipv4": rf"^({_OCTET}\.){{3}}{_OCTET}$",
    "hostname": rf"^{_LABEL}(\.{_LABEL})*$",
    "email": rf"^[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~-]+)*@{_LABEL}(\.{_LABEL})+$",
}

"""Patterns compiled to DFAs (:mod:`tritium.engine.regex`): on thousands of random strings over the alphabet
JSON mode writes unescaped, a DFA accepts exactly what Python's ``re.search`` (ASCII) matches; every state it
gives can still reach a match; what it cannot compile is refused by name."""

import random
import re

import pytest

from tritium.engine.regex import ALPHABET, FORMATS, MAX_STATES, compile_pattern

PATTERNS = [r"^\d+$", r"ab|cd", r"^(a|b)*c{2,3}$", r"^[A-Z][a-z]{0,4}$", r"x\.y", r"^[^abc]+$", r"^a?b+?$",
            r"^(?:ab){2}$", r"^\w+@\w+\.com$", r"^[-+]?\d*\.?\d+$", r"^.{3}$", r"^a{0}b$", r"[0-9]{2,}", r"^\S\s\W$",
            r"^[\d.]+$", r"a{1,2}?b"] + list(FORMATS.values())
SAMPLES = ["2024-02-29", "2024-13-01", "12:30:59Z", "2024-01-01T10:00:00+02:00", "192.168.0.1", "256.1.1.1",
           "123e4567-e89b-12d3-a456-426614174000", "a@b.co", "x.y@foo-bar.example.com", "my-host.example", "x{,3}",
           "aaaa", "ab", "cd", "", "aab", "abab", "abcc", "bccc", "x_1@y2.com", "a.b", "+1.5", ".5", "5. "]


def _accepts(dfa, text: str) -> bool:
    state = dfa.start
    for b in text.encode():
        state = dfa.step(state, b)
        if state is None:
            return False
    return dfa.accepting(state)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_dfa_matches_what_python_re_matches(pattern):
    dfa = compile_pattern(pattern)
    rx = re.compile(pattern, re.ASCII)
    rng = random.Random(pattern)
    alphabet = [chr(b) for b in sorted(ALPHABET)]
    small = list("abcdxyzABC0123456789.-+@:TZ{},")
    texts = SAMPLES + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))) for _ in range(1500)]
    texts += ["".join(rng.choice(small) for _ in range(rng.randint(0, 24))) for _ in range(1500)]
    matched = 0
    for text in texts:
        assert _accepts(dfa, text) == bool(rx.search(text)), text
        matched += _accepts(dfa, text)
    assert matched > 0
    # pruned: from every state a match can still be reached
    reach = {i for i in range(len(dfa.table)) if dfa.accepting(i)}
    changed = True
    while changed:
        changed = False
        for i, row in enumerate(dfa.table):
            if i not in reach and any(t in reach for t in row.values()):
                reach.add(i)
                changed = True
    assert reach == set(range(len(dfa.table)))


@pytest.mark.parametrize("pattern,message", [
    ("(?=a)", "lookaround"), ("(?<n>a)", "lookaround and named groups"), (r"(a)\1", r"escape \\1"),
    ("a{2}{2}", "nothing to repeat"), ("a*?+", "nothing to repeat"),
    (r"\bx", r"escape \\b"), ("a)", "unexpected '\\)'"), ("(a", "unclosed group"), ("[ab", "unclosed character class"),
    ("*a", "nothing to repeat"), ("a^b", "only at the start"), ("a{3,1}", "below its minimum"),
    ("a{999}", "repeat count above"), ("[z-a]", "bad range"), ("\\", "ends in a backslash"),
    ('^"$', "matches no string"), (r"^\n$", "matches no string"), ("^é$", "matches no string"),
    ("(a|b|c|d|e|f|g|h){0,40}x.{0,12}y", "DFA states|automaton states"), (5, "must be a string"),
])
def test_what_cannot_be_compiled_is_refused(pattern, message):
    with pytest.raises(ValueError, match=message):
        compile_pattern(pattern)


def test_braces_that_are_no_count_are_literal():
    """As ECMAScript reads them (Python's re reads ``{,3}`` as a count)."""
    for pattern, yes, no in [(r"^x{,3}$", "x{,3}", "xxx"), (r"^a{b$", "a{b", "ab"), (r"^{}$", "{}", "")]:
        dfa = compile_pattern(pattern)
        assert _accepts(dfa, yes) and not _accepts(dfa, no), pattern


def test_the_state_bound():
    assert MAX_STATES >= 1024  # the formats' DFAs fit well inside (the email one is the largest: < 400)
    assert max(len(compile_pattern(p).table) for p in FORMATS.values()) < 400

"""Guided answers (``response_format="choice"`` / ``"regex"``): the regular expressions against Python's ``re``
(full matches over printable ASCII, tab and line breaks), the masks against a token-by-token check of the
vocabulary, and the engine: every answer is one of the choices, or a full match, or a prefix of one cut at
max_tokens; EOS ends an answer only where it may end."""

import random
import re

import pytest
import torch

from tritium import LLM, SamplingParams
from tritium.engine.guided import GuidedConstraint, compile_choice, compile_regex, missing_bytes
from tritium.engine.json_mode import TokenIndex, advance_bytes
from tritium.engine.regex import TEXT
from tritium.engine.tokenizer import Tokenizer

from .conftest import assert_masks_exact

PATTERNS = [r"\d{3}-[a-z]{2,4}", r"(yes|no|maybe)", r"a.c", r"[^x]+", r"\s*\w+\s*", r"caf(é|e)", r'"[a-z]*"',
            r"line\none", r"(ab|a)*b?", r"^x{2,}$", r"\\d", r"[\t ]+x"]


def _matches(grammar, text: str) -> bool:
    state = advance_bytes(grammar.start, text.encode(), grammar.advance)
    return state is not None and grammar.accepting(state)


def _random_text(rng, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(n)))


@pytest.mark.parametrize("pattern", PATTERNS)
def test_regex_agrees_with_python_fullmatch(pattern):
    """On random strings over the pattern's own characters and some others, and on strings Python matches
    (found among them), the DFA accepts exactly what ``re.fullmatch`` does (non-ASCII characters: where the
    pattern writes them)."""
    grammar = compile_regex(pattern)
    rng = random.Random(pattern)
    alphabet = "".join(sorted(set(pattern) | set("abxy19-\n\t é\"")))
    texts = [_random_text(rng, alphabet, 12) for _ in range(3000)]
    texts += ["123-ab", "yes", "maybe", "abc", "a\nc", "  word ", "café", "cafe", '"abc"', "line\none", "abab",
              "xx", "\\d", "\t x"]
    hits = 0
    for text in texts:
        # a non-ASCII character matches only where the pattern writes it (not through '.' or [^...])
        written = all(ord(c) < 0x80 or c in pattern for c in text)
        want = re.fullmatch(pattern, text) is not None and written
        hits += want
        assert _matches(grammar, text) == want, (pattern, text)
    assert hits > 0, pattern


def test_regex_text_alphabet_and_errors():
    dot = compile_regex(".")
    assert all(_matches(dot, chr(b)) for b in TEXT if b != 0x0A) and not _matches(dot, "\n")
    assert not _matches(dot, "é")  # non-ASCII only where the pattern writes it
    for pattern, message in (("", "non-empty string"), ("(a", "an unclosed group"), ("[é]", "non-ASCII character"),
                             (r"\bx", r"escape \\b"), ("a{3,1}", "maximum below its minimum"),
                             ("\x00", "matches no string")):
        with pytest.raises(ValueError, match=message):
            compile_regex(pattern)
    for _ in range(2):  # a refusal is cached like a grammar, and raised again
        with pytest.raises(ValueError, match="more than 2048 DFA states"):
            compile_regex("(a|b)*a(a|b){10}")


def test_choice_grammar():
    grammar = compile_choice(["1", "10", "100", "yes"])
    one = advance_bytes(grammar.start, b"1", grammar.advance)
    assert grammar.accepting(one) and not grammar.complete(one)  # "1" may end, or go on to "10"
    assert grammar.complete(advance_bytes(grammar.start, b"100", grammar.advance))
    assert grammar.complete(advance_bytes(grammar.start, b"yes", grammar.advance))
    assert advance_bytes(grammar.start, b"1000", grammar.advance) is None
    assert compile_choice(["a", "b"]) is compile_choice(("a", "b"))  # cached
    for bad, message in (([], "non-empty list"), ("yes", "non-empty list"), (["a", ""], r"choices\[1\]"),
                         (["a", 3], r"choices\[1\]"), (["x"] * 1025, "at most 1024")):
        with pytest.raises(ValueError, match=message):
            compile_choice(bad)
    with pytest.raises(ValueError, match="choices goes with response_format 'choice'"):
        SamplingParams(choices=["a"])
    with pytest.raises(ValueError, match="regex goes with response_format 'regex'"):
        SamplingParams(response_format="regex")
    with pytest.raises(ValueError, match=r"^regex: pattern '\(a': an unclosed group"):  # the field named
        SamplingParams(response_format="regex", regex="(a")
    with pytest.raises(ValueError, match=r"^choices\[1\] must be a non-empty string"):  # named already: as it was
        SamplingParams(response_format="choice", choices=["a", 3])


def test_masks_equal_a_check_of_every_token(json_model):
    index = TokenIndex(Tokenizer.from_hf_dir(json_model), 448)
    choice = compile_choice(["apple", "apricot", "banana split", "b", "日本"])
    assert not missing_bytes(choice, index)
    assert_masks_exact(index, choice, ["apple", "apricot", "banana split", "日本"])
    regex = compile_regex(r"\d{1,3}(\.\d+)?( [a-z]+)?")
    assert_masks_exact(index, regex, ["12.5 abc", "7", "999 x"])
    # states with more than 16 next bytes step every token at once (DfaGrammar.token_mask), the others walk the trie
    wide = compile_regex(r"[A-Za-z ,.]{1,12}\n(.|\n)*")
    assert len(wide.dfa.table[wide.start]) > 16
    assert_masks_exact(index, wide, ["Hello there.\nanything\n at all", "a\n"])


def test_guided_constraint_allows_eos_only_where_an_answer_may_end(json_model):
    tok = Tokenizer.from_hf_dir(json_model)
    index = TokenIndex(tok, 448)
    eos = tok.eos_token_ids[0]
    constraint = GuidedConstraint(index, compile_choice(["1", "10"]), (eos,))
    assert not constraint.mask(torch.device("cpu"))[eos]
    assert constraint.accept(tok.encode("1", add_special_tokens=False)[0])
    assert constraint.mask(torch.device("cpu"))[eos] and not constraint.complete
    assert constraint.accept(eos) is False  # not the answer's: the request stops on it
    with pytest.raises(ValueError, match="cannot follow"):
        GuidedConstraint(index, compile_choice(["1", "10"]), (eos,)).accept(eos)


def test_engine_answers_are_choices_and_matches(json_model):
    """Sampled at temperature 1 and greedy: every answer is one of the choices (finish reason stop) or a full
    match of the regex; with prefixes among the choices, EOS ends the shorter ones, and with ignore_eos only
    the longest, which nothing follows, ends an answer."""
    choices = ["1", "10", "100", "yes", "no", "maybe so"]
    with LLM(json_model, max_model_len=256, kv_cache_memory=16 << 20, max_num_seqs=8) as llm:
        outs = llm.generate(["w1", "w2 w3", "w4", "w5"] * 2, [
            SamplingParams(max_tokens=20, temperature=1.0, seed=s, response_format="choice", choices=choices)
            for s in range(8)])
        assert all(o.text in choices and o.finish_reason == "stop" for o in outs), [o.text for o in outs]
        assert len({o.text for o in outs}) > 1
        greedy = llm.generate(["w1"], SamplingParams(max_tokens=20, response_format="choice", choices=choices))[0]
        assert greedy.text in choices
        longest = llm.generate(["w2"] * 4, [
            SamplingParams(max_tokens=20, temperature=1.0, seed=s, response_format="choice", choices=["1", "10", "100"],
                           ignore_eos=True) for s in range(4)])
        assert [o.text for o in longest] == ["100"] * 4
        pattern = r"\d{3}-[a-z]{2,4}( ok)?"
        matched = llm.generate(["w1", "w2", "w3"], [
            SamplingParams(max_tokens=30, temperature=1.0, seed=s, response_format="regex", regex=pattern)
            for s in range(3)])
        assert all(re.fullmatch(pattern, o.text) and o.finish_reason == "stop" for o in matched), [
            o.text for o in matched]
        cut = llm.generate(["w1"], SamplingParams(max_tokens=3, response_format="regex", regex=r"[a-z]{10}"))[0]
        assert cut.finish_reason == "length" and re.fullmatch(r"[a-z]{1,3}", cut.text), cut.text
        assert llm.engine.constraint_error(SamplingParams(response_format="choice", choices=["日本"])) is None


def test_a_word_level_vocabulary_is_refused(tiny_models):
    path, _ = tiny_models["llama"]
    with LLM(path, dtype=torch.float32, max_model_len=64) as llm:
        params = SamplingParams(response_format="choice", choices=["w1", "w2"])
        assert "lacks one-byte tokens" in llm.engine.constraint_error(params)
        with pytest.raises(ValueError, match=r"response_format 'choice' of prompts\[0\]: .*lacks one-byte tokens"):
            llm.generate(["w1"], params)

"""The ``<think>`` part of an answer told apart from its content: opened by the answer or by the prompt,
closed or cut off, absent; the same split however the answer is streamed, with nothing shown early."""

import random

import pytest

from tritium.engine.reasoning import ReasoningStream, prompt_opens_reasoning, split_reasoning

CASES = [
    # (answer, prompt leaves <think> open, reasoning, content)
    ("<think>\nweigh it\n</think>\n\nThe answer.", False, "\nweigh it\n", "The answer."),
    ("  <think>a</think>b", False, "a", "b"),
    ("weigh it</think>\n\nThe answer.", True, "weigh it", "The answer."),
    ("<think>cut off while thinki", False, "cut off while thinki", ""),
    ("cut off while thinking", True, "cut off while thinking", ""),
    ("The answer, no block.", False, None, "The answer, no block."),
    ("The answer mentions <think> later.", False, None, "The answer mentions <think> later."),
    ("<think></think>x", False, "", "x"),
    ("<thin", False, None, "<thin"),
    ("", False, None, ""),
    ("a < b </think", True, "a < b </think", ""),
]


@pytest.mark.parametrize("text, opened, reasoning, content", CASES)
def test_whole_and_streamed(text, opened, reasoning, content):
    assert split_reasoning(text, opened) == (reasoning, content)
    rng = random.Random(len(text))
    chunkings = [list(range(1, len(text)))] + [sorted(rng.sample(range(1, len(text)), min(len(text) - 1, k)))
                                                for k in (1, 2, 5) for _ in range(5) if len(text) > 1]
    for cuts in chunkings:
        stream, events = ReasoningStream(opened), []
        for a, b in zip([0] + cuts, cuts + [len(text)]):
            events += stream.feed(text[a:b])
        events += stream.finish()
        assert "".join(t for k, t in events if k == "reasoning") == (reasoning or ""), cuts
        assert "".join(t for k, t in events if k == "content") == content, cuts
        assert all(t for _, t in events) and stream.reasoned == (reasoning is not None)


def test_reasoning_streams_as_it_comes():
    stream = ReasoningStream()
    assert stream.feed(" <th") == []  # may still open a block
    assert stream.feed("ink>I think") == [("reasoning", "I think")]
    assert stream.feed(" more </thi") == [("reasoning", " more ")]  # "</thi" may close it: held
    assert stream.feed("nk>\n") == []  # blank space after the block is neither
    assert stream.feed("\nAnswer") == [("content", "Answer")]
    assert stream.finish() == []


def test_prompt_opens_reasoning():
    assert prompt_opens_reasoning("<|im_start|>assistant\n<think>\n")
    assert not prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n")  # Qwen3, thinking off
    assert not prompt_opens_reasoning("<|im_start|>assistant\n")
    assert prompt_opens_reasoning("<think>old</think> and <think>")

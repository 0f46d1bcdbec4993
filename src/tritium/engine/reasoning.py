"""Reasoning: the ``<think> ... </think>`` part of an answer (Qwen3, QwQ, DeepSeek-R1 and their distils)
told apart from the answer itself, so that a server returns it as ``reasoning_content``.

An answer is in its reasoning from its start where the prompt leaves a ``<think>`` open (templates that
open the block themselves: DeepSeek-R1, Qwen3's thinking-only models) or where the answer opens one (after
blank space); the reasoning ends at ``</think>``, and what follows (blank space dropped) is the content. An
answer cut off inside its reasoning has no content; an answer with no ``<think>`` is content only (Qwen3
with thinking off, whose template writes an empty block into the prompt).
:class:`ReasoningStream` does the same on a streamed answer, holding back only what may be part of a tag.
"""

from __future__ import annotations

OPEN, CLOSE = "<think>", "</think>"


def prompt_opens_reasoning(prompt_text: str) -> bool:
    """Whether a rendered prompt ends inside a ``<think>`` block (the answer starts in its reasoning)."""
    at = prompt_text.rfind(OPEN)
    return at >= 0 and CLOSE not in prompt_text[at:]


def split_reasoning(text: str, open_at_start: bool = False) -> tuple[str | None, str]:
    """(reasoning or None, content) of a whole answer."""
    stream = ReasoningStream(open_at_start)
    events = stream.feed(text) + stream.finish()
    reasoning = "".join(t for kind, t in events if kind == "reasoning")
    content = "".join(t for kind, t in events if kind == "content")
    return (reasoning if stream.reasoned else None), content


class ReasoningStream:
    """``feed(delta)`` / ``finish()`` return ``("reasoning" | "content", text)`` events in answer order."""

    def __init__(self, open_at_start: bool = False):
        self.open_at_start = open_at_start  # the prompt left a <think> block open
        self.state = "reasoning" if open_at_start else "start"  # start -> reasoning -> after -> content
        self.reasoned = open_at_start  # whether the answer had a reasoning part
        self.buffer = ""

    def feed(self, delta: str) -> list[tuple[str, str]]:
        self.buffer += delta
        return self._run(final=False)

    def finish(self) -> list[tuple[str, str]]:
        return self._run(final=True)

    def _run(self, final: bool) -> list[tuple[str, str]]:
        events = []
        while True:
            if self.state == "start":  # may the answer still open a block?
                head = self.buffer.lstrip()
                if head.startswith(OPEN):
                    self.buffer, self.state, self.reasoned = head[len(OPEN):], "reasoning", True
                    continue
                if not final and OPEN.startswith(head):
                    return events  # blank space or a part of <think> so far
                self.state = "content"
                continue
            if self.state == "reasoning":
                end = self.buffer.find(CLOSE)
                if end >= 0:
                    if end:
                        events.append(("reasoning", self.buffer[:end]))
                    self.buffer, self.state = self.buffer[end + len(CLOSE):], "after"
                    continue
                keep = 0 if final else partial_suffix(self.buffer, CLOSE)
                text, self.buffer = self.buffer[:len(self.buffer) - keep], self.buffer[len(self.buffer) - keep:]
                if text:
                    events.append(("reasoning", text))
                return events
            if self.state == "after":  # the blank space between the block and the content is neither
                self.buffer = self.buffer.lstrip()
                if not self.buffer and not final:
                    return events
                self.state = "content"
                continue
            if self.buffer:
                events.append(("content", self.buffer))
                self.buffer = ""
            return events


def partial_suffix(text: str, marker: str) -> int:
    """Length of the longest end of ``text`` that is a proper start of ``marker`` (what a stream holds back
    while the marker may be coming)."""
    for n in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-n:]):
            return n
    return 0

"""LoRA adapters in the engine: which adapter a request runs (:class:`LoRARequest`), and which of the model's
adapter slots each adapter occupies (:class:`LoRASlots`).

An adapter is read from its directory the first time a request names it and kept on the host (registered by
name: a later request may name it alone). A running sequence holds its adapter's slot; an adapter is copied into a
free slot when a waiting sequence that needs it is admitted (an empty slot first, else the one left longest
ago); with every slot held by running sequences of other adapters, the sequence waits for one to free, in
arrival order. So a step mixes at most ``max_loras`` adapters, and a slot never changes under a sequence.
"""

from __future__ import annotations

import collections
import dataclasses
import os

from tritium.models.config import ModelConfig
from tritium.models.lora import LoRAAdapter, LoRAStack


@dataclasses.dataclass(frozen=True)
class LoRARequest:
    """The adapter a request runs with: ``name`` (how it is reported and registered) and the PEFT directory it
    is read from (None: one registered before under ``name``)."""

    name: str
    path: str | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"LoRARequest name must be a non-empty string, got {self.name!r}")
        if self.path is not None and (not isinstance(self.path, str) or not self.path):  # ("": the current directory)
            raise ValueError(f"LoRARequest path must be a non-empty string (a PEFT adapter directory), got "
                             f"{self.path!r}")


class LoRASlots:
    """The adapters this engine knows (host copies) and the device slots of ``stack`` they run from."""

    def __init__(self, stack: LoRAStack, config: ModelConfig):
        self.stack, self.config = stack, config
        self.adapters: dict[str, LoRAAdapter] = {}
        self.ids: dict[str, int] = {}  # a number per adapter as read (the prefix cache's salt): a name read again
        self._next_id = 1  # from another path gets a new one, so that no page of the old adapter is matched
        self.slot_of: dict[str, int] = {}
        self.holder: list[str | None] = [None] * stack.max_loras  # the adapter in each slot
        self.refs = [0] * stack.max_loras
        self.idle = collections.OrderedDict()  # slots with an adapter and no running sequence, oldest first

    def register(self, name: str, path: str) -> LoRAAdapter:
        """Read the adapter at ``path`` under ``name`` (again, if ``name`` was registered from another path:
        the slots holding the old one are cleared)."""
        old = self.adapters.get(name)
        if old is not None and os.path.realpath(old.path) == os.path.realpath(path):
            return old
        adapter = LoRAAdapter.load(path, self.config, name=name, max_rank=self.stack.max_rank)
        if old is not None:
            slot = self.slot_of.get(name)
            if slot is not None and self.refs[slot]:
                raise ValueError(f"LoRA adapter {name!r} is in use by running requests; it cannot be replaced "
                                 f"by {path!r} now")
            self._evict(name)
        self.adapters[name] = adapter
        self.ids[name], self._next_id = self._next_id, self._next_id + 1
        return adapter

    def resolve(self, request: LoRARequest) -> LoRARequest:
        """Check ``request`` (reading its adapter if new); returns it with its path filled in."""
        if request.path is None:
            if request.name not in self.adapters:
                raise ValueError(f"LoRA adapter {request.name!r} is not loaded; give its path (known: "
                                 f"{sorted(self.adapters) or 'none'})")
            return LoRARequest(request.name, self.adapters[request.name].path)
        self.register(request.name, request.path)
        return request

    def salt(self, name: str) -> int:
        return hash(("lora", self.ids[name]))

    def acquire(self, name: str) -> int | None:
        """A slot holding adapter ``name`` for one more running sequence; None while every slot is held by
        running sequences of other adapters."""
        slot = self.slot_of.get(name)
        if slot is None:
            free = [s for s, h in enumerate(self.holder) if h is None]
            if free:
                slot = free[0]
            elif self.idle:
                slot, _ = self.idle.popitem(last=False)
                del self.slot_of[self.holder[slot]]
            else:
                return None
            self.stack.load(slot, self.adapters[name])
            self.holder[slot], self.slot_of[name] = name, slot
        self.idle.pop(slot, None)
        self.refs[slot] += 1
        return slot

    def release(self, slot: int) -> None:
        """One running sequence less on ``slot`` (its adapter stays there until the slot is needed)."""
        self.refs[slot] -= 1
        if self.refs[slot] == 0:
            self.idle[slot] = None

    def _evict(self, name: str) -> None:
        slot = self.slot_of.pop(name, None)
        if slot is not None:
            self.stack.clear(slot)
            self.holder[slot] = None
            self.idle.pop(slot, None)

    def remove(self, name: str) -> None:
        """Forget adapter ``name`` (ValueError while running requests use it)."""
        if name not in self.adapters:
            raise ValueError(f"LoRA adapter {name!r} is not loaded")
        slot = self.slot_of.get(name)
        if slot is not None and self.refs[slot]:
            raise ValueError(f"LoRA adapter {name!r} is in use by running requests")
        self._evict(name)
        del self.adapters[name], self.ids[name]

"""A request as the engine tracks it (:class:`Sequence`) and what the engine reports about it each step
(:class:`RequestOutput`)."""

from __future__ import annotations

import dataclasses
import enum

import torch

from tritium.engine.detokenizer import IncrementalDetokenizer
from tritium.engine.json_mode import JsonConstraint, ReasoningThenJson
from tritium.engine.lora import LoRARequest
from tritium.engine.sampling import SamplingParams, TokenLogprobs
from tritium.engine.speculative import Acceptance, NgramIndex


class Status(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclasses.dataclass(eq=False)
class Sequence:
    """One request: its tokens (prompt then generated), pages and progress.

    ``num_computed`` tokens have their K/V in the cache; the step computes ``token_ids[num_computed:
    num_computed + n]`` and, when that reaches the end, samples one more token. The block manager owns the
    pages; ``block_table`` lists this sequence's (written only through the scheduler).
    """

    seq_id: int
    token_ids: list[int]
    params: SamplingParams
    request_id: str = ""
    prompt_len: int = 0
    num_computed: int = 0
    block_table: list[int] = dataclasses.field(default_factory=list)
    block_keys: list[int] = dataclasses.field(default_factory=list)
    # the windowed layers' pages (BlockManager.window_pool), indexed as block_table; -1: released (behind the
    # window); the first ``window_lo`` are
    window_table: list[int] = dataclasses.field(default_factory=list)
    window_lo: int = 0
    status: Status = Status.WAITING
    finish_reason: str | None = None
    stop_reason: str | int | None = None  # the stop string, or the stop_token_ids token, that ended it
    new_logprobs: list[TokenLogprobs] | None = None
    num_preemptions: int = 0
    # prompt tokens whose K/V came from the prefix cache when the sequence was first scheduled (None before)
    num_cached_tokens: int | None = None
    generator: torch.Generator | None = None  # of a seeded request
    prompt_text: str | None = None
    detokenizer: IncrementalDetokenizer | None = None
    logprobs: list[TokenLogprobs] | None = None  # one per generated token when params.logprobs is set
    # params.prompt_logprobs: one per prompt token (None for the first), filled as the prompt is computed;
    # the first ``prompt_scored`` entries are known
    prompt_logprobs: list[TokenLogprobs | None] | None = None
    prompt_scored: int = 1
    # with params.response_format: the answer's JSON (or schema) state (after its reasoning: reasoning_after)
    json: JsonConstraint | ReasoningThenJson | None = None
    # speculative decoding: the draft this step computes after the last token (set by the scheduler, cleared
    # once verified), the index its drafts come from (None: none, or only the draft model's), and its drafts'
    # recent acceptance (how long the next one is, or whether there is one; None: the sequence gets no drafts)
    draft: list[int] = dataclasses.field(default_factory=list)
    lookup: NgramIndex | None = None
    acceptance: Acceptance | None = None
    # with a draft model (EngineConfig.speculative_model): whether this step's draft is the draft model's to fill
    # (the scheduler sets its length), and the positions whose K/V the draft model's cache holds right: < this
    draft_from_model: bool = False
    draft_computed: int = 0
    # with a prediction (SamplingParams.prediction): whether this step's draft came from it, and the draft tokens
    # from it verified so far, accepted and not
    draft_predicted: bool = False
    prediction_accepted: int = 0
    prediction_rejected: int = 0
    # an embedding request (params.pooling): the pooled hidden state so far ("mean": the sum of its rows), fp32
    pool_sum: torch.Tensor | None = None
    # a LoRA adapter's request: the adapter (engine.lora.LoRARequest), the slot it runs from while running (None:
    # not placed), and the prefix cache's salt (its pages' K/V are the adapter's)
    lora: LoRARequest | None = None
    lora_slot: int | None = None
    cache_salt: int | None = None

    @property
    def scores_prompt(self) -> bool:
        """Whether prompt tokens still need their log-probabilities (params.prompt_logprobs)."""
        return self.prompt_logprobs is not None and self.prompt_scored < self.prompt_len

    def __post_init__(self):
        self.prompt_len = self.prompt_len or len(self.token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def output_ids(self) -> list[int]:
        return self.token_ids[self.prompt_len:]


@dataclasses.dataclass
class RequestOutput:
    """What one request produced: the generated continuation only, so far (``token_ids`` ends with EOS when
    the model stopped on it; ``text`` leaves special tokens out and is cut before a stop string).

    ``new_token_ids`` and ``text_delta`` are this step's part; the deltas of all steps concatenate to
    ``text`` (text is held back while it may still be the start of a stop string or of a multi-byte
    character). ``finish_reason``: "stop" (EOS or a stop string), "length" (``max_tokens`` or the
    context) or "abort"; None while running.

    With ``SamplingParams.logprobs`` set, ``logprobs`` has one :class:`TokenLogprobs` per generated token
    so far and ``new_logprobs`` this step's (else both are None). With ``SamplingParams.prompt_logprobs``
    set, ``prompt_logprobs`` has one per prompt token (None for the first), in every output once the prompt
    is computed. ``num_cached_tokens``: the prompt tokens whose K/V the prefix cache held when the request was
    first scheduled (not computed again). ``accepted_prediction_tokens`` / ``rejected_prediction_tokens``: the
    draft tokens taken from ``SamplingParams.prediction`` that verification accepted / rejected so far.
    ``embedding``: an embedding request's pooled hidden state (``SamplingParams.pooling``; no tokens).

    Samples (``SamplingParams.n``): ``LLM.generate`` and ``LLM.chat`` return one output per prompt whatever ``n``;
    its own fields are sample 0's, and ``outputs`` lists the prompt's ``n`` samples in order (each a RequestOutput
    of its own request, ``outputs[j].index == j``, ``outputs[0]`` the output itself): ``out.outputs[j].text``.
    With one sample (``n`` 1, and every output of ``LLMEngine.step``) ``outputs`` is ``[self]``, so code written for
    ``n`` reads the same either way.
    """

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    token_ids: list[int]
    text: str
    new_token_ids: list[int] = dataclasses.field(default_factory=list)
    text_delta: str = ""
    finished: bool = False
    finish_reason: str | None = None
    stop_reason: str | int | None = None  # vLLM's: the stop string or stop token id that ended it (None: EOS...)
    logprobs: list[TokenLogprobs] | None = None
    new_logprobs: list[TokenLogprobs] | None = None
    prompt_logprobs: list[TokenLogprobs | None] | None = None
    num_cached_tokens: int = 0  # prompt tokens taken from the prefix cache, not computed (OpenAI's cached_tokens)
    # draft tokens taken from SamplingParams.prediction that verification accepted / rejected (OpenAI's
    # completion_tokens_details)
    accepted_prediction_tokens: int = 0
    rejected_prediction_tokens: int = 0
    embedding: torch.Tensor | None = None  # an embedding request's (SamplingParams.pooling): [hidden] fp32, on the CPU
    index: int = 0  # which of its prompt's samples this is (SamplingParams.n)

    # (not a field: the list holds the output itself, which equality, repr and asdict would walk without end)
    _samples = None

    @property
    def outputs(self) -> list[RequestOutput]:
        """The prompt's samples in order (``SamplingParams.n`` of them; ``[self]`` for one)."""
        return [self] if self._samples is None else list(self._samples)

    @outputs.setter
    def outputs(self, samples: list[RequestOutput]) -> None:
        self._samples = list(samples)

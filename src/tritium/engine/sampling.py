"""Sampling parameters and the sampler: greedy, temperature, top-k, top-p, per-request seeds, presence and
frequency penalties, log-probabilities of the sampled tokens and their top alternatives."""

from __future__ import annotations

import dataclasses

import torch

from tritium.engine.guided import compile_choice, compile_regex
from tritium.engine.json_schema import compile_schema

MAX_LOGPROBS = 20
MAX_REPETITION_PENALTY = 10.0
# NOTE: temperatures below this are greedy (vLLM's _SAMPLING_EPS): logits / 1e-38 overflow fp32 to +-inf, whose
# softmax is NaN everywhere, and the draw then took token 0 every step.
MIN_TEMPERATURE = 1e-5
RESPONSE_FORMATS = (None, "json_object", "json_schema", "choice", "regex")
POOLINGS = (None, "last", "mean")


@dataclasses.dataclass
class SamplingParams:
    """How to pick tokens for one request.

    - ``max_tokens``: tokens to generate at most (>= 0). 0 runs the prompt alone (its ``prompt_logprobs``, its
      pages for the prefix cache) and generates nothing: a prompt may then fill the whole context (scoring,
      perplexity windows); finish reason "length".
    - ``temperature``: 0 is greedy (argmax), as is any below 1e-5 (``MIN_TEMPERATURE``); above, samples from
      softmax(logits / temperature). Finite.
    - ``top_k``: keep the k most likely tokens (0: all). ``top_p``: keep the smallest set whose
      probability reaches p (1.0: all). ``min_p``: keep the tokens at least ``min_p`` times as likely as the
      most likely one (0: all); all three on the distribution after temperature.
    - ``seed``: makes the request's samples reproducible (independent of the rest of the batch); all 64 bits
      count (:func:`seeded_generator`).
    - ``stop``: strings that end the generation; the text is cut before the first one.
    - ``ignore_eos``: keep generating past EOS (benchmarks).
    - ``stop_token_ids``: tokens that end the generation besides EOS: the id ends ``token_ids`` as EOS does, its
      text is left out of the answer unless ``include_stop_str_in_output`` (as vLLM).
    - ``logit_bias`` (OpenAI's): {token id: bias in [-100, 100]} added to those tokens' logits before
      sampling (greedy too); -100 in effect bans a token, 100 forces it.
    - ``min_tokens``: EOS and ``stop_token_ids`` cannot be sampled before this many tokens, nor do stop strings
      end the answer before then (as vLLM: one that ends in the text of a later token does); at most
      ``max_tokens``.
    - ``presence_penalty`` / ``frequency_penalty`` (OpenAI's, in [-2, 2]): before sampling, the logit of
      every token generated ``c`` times so far is lowered by ``frequency_penalty * c + presence_penalty *
      (c > 0)``; the prompt does not count.
    - ``repetition_penalty`` (transformers' and vLLM's, > 0; 1 is off): every token of the prompt or the
      answer so far has its logit divided by it where positive, multiplied by it where not.
    - ``logprobs``: report the log-probability of each sampled token and of the ``logprobs`` most likely
      tokens at its position (0: the sampled token's only; None: none), from the model's distribution
      (log-softmax of the logits, before penalties, temperature and filtering); at most 20.
    - ``skip_special_tokens`` (vLLM's): False writes special tokens out in the text (the EOS that ends the
      answer excepted); True (default) leaves them out.
    - ``include_stop_str_in_output`` (vLLM's): the text ends with the stop string that ended it (default: cut
      before it). ``RequestOutput.stop_reason`` names that string, or the ``stop_token_ids`` token.
    - ``prompt_logprobs``: the same for every prompt token (0: its own log-probability; k: and the k most
      likely tokens at its position; None: none), given the tokens before it; the first prompt token has
      none. The prompt is then computed in full (no prefix-cache hit), and the LM head runs over every
      prompt position, in chunks.
    - ``response_format``: None (free text) or "json_object" (OpenAI's JSON mode): every token is drawn among
      those that keep the answer a prefix of one JSON object, and the answer ends when that object closes
      (finish reason "stop"; :mod:`tritium.engine.json_mode`). "json_schema": one JSON object that
      ``json_schema`` (a JSON Schema, decoded) accepts, its properties in the schema's order
      (:mod:`tritium.engine.json_schema` says which keywords are enforced; others are refused). "choice": the
      answer is one of ``choices`` (strings); "regex": it matches ``regex`` in full (vLLM's guided choice and
      regex; :mod:`tritium.engine.guided`). Needs the model's tokenizer.
    - ``continuation``: the answer's text continues the prompt's (completions): decoded after the prompt's last
      token where that is text, so SentencePiece's leading "▁" is a space (" Paris" after "The capital of France
      is"), as decoding prompt and answer together gives (and vLLM). False (``LLM.chat`` and chat requests,
      unless they continue the final message): the answer's text stands alone, ``decode(output_ids)``.
    - ``reasoning_after``: with a ``response_format``, let a reasoning block come first and hold only what
      follows it to the JSON: the answer may begin with the ``<think>`` token (or the prompt opened the block:
      ``reasoning_open``), is free until ``</think>``, then JSON mode applies (a reasoning parser's models:
      Qwen3, DeepSeek-R1). False: JSON from the first token, a reasoning block never written.
    - ``prediction`` (OpenAI's predicted outputs): text (tokenized without special tokens) or token ids that the
      answer is expected to largely repeat, such as the file an edit rewrites. With speculative decoding on
      (``num_speculative_tokens``), a request that may get drafts (:attr:`draftable`) takes them from it first
      (:class:`~tritium.engine.speculative.NgramIndex`); it never changes the answer, only how many tokens a
      step yields. Otherwise it is ignored.
    - ``pooling`` (an embedding request): "last" or "mean"; no token is generated, and the request ends once its
      prompt is computed with ``RequestOutput.embedding``, the final-normed hidden state of its last prompt token
      ("last": decoder embedding models such as Qwen3-Embedding) or the mean over its prompt tokens ("mean": the
      prompt is then computed in full, no prefix-cache hit). The other fields do not apply.
    - ``n`` (vLLM's and OpenAI's): independent samples of the prompt, an int >= 1 (default 1). ``LLM.generate`` and
      ``LLM.chat`` run them (:class:`~tritium.engine.sequence.RequestOutput`'s ``outputs``), sample i with ``seed +
      i`` where a ``seed`` is set (as the server's choices): they differ, and the same call gives the same samples
      (sample 0 is what ``n=1`` gives); greedy samples are alike. ``LLMEngine.add_request`` and ``generate_stream``
      run one sample and refuse n > 1; an embedding request (``pooling``) takes none.

    Greedy requests without penalties or logprobs run in decode windows on the device
    (:attr:`device_greedy`); the others are sampled on the host every step.
    """

    max_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: list[str] | str | None = None
    ignore_eos: bool = False
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logprobs: int | None = None
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    stop_token_ids: list[int] | None = None
    min_tokens: int = 0
    logit_bias: dict[int, float] | None = None
    prompt_logprobs: int | None = None
    skip_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    response_format: str | None = None
    json_schema: dict | bool | None = None
    choices: list[str] | None = None
    regex: str | None = None
    reasoning_after: bool = False
    reasoning_open: bool = False
    prediction: str | list[int] | None = None
    pooling: str | None = None
    continuation: bool = True
    n: int = 1

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the bad field, the expected range and the value given (a ``stop`` string set
        after construction is made a list here too)."""
        if isinstance(self.stop, str) and self.stop:
            self.stop = [self.stop]
        if not isinstance(self.max_tokens, int) or isinstance(self.max_tokens, bool) or self.max_tokens < 0:
            raise ValueError(f"max_tokens must be an int >= 0, got {self.max_tokens!r}")
        if not isinstance(self.temperature, (int, float)) or isinstance(self.temperature, bool) \
                or not 0 <= self.temperature < float("inf"):
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature!r}")
        if not isinstance(self.top_p, (int, float)) or isinstance(self.top_p, bool) or not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not isinstance(self.top_k, int) or isinstance(self.top_k, bool) or not 0 <= self.top_k < 2**63:
            raise ValueError(f"top_k must be an int >= 0 (0 disables it), got {self.top_k!r}")
        if not isinstance(self.n, int) or isinstance(self.n, bool) or self.n < 1:
            raise ValueError(f"n must be an int >= 1 (samples of the prompt), got {self.n!r}")
        if self.seed is not None and (not isinstance(self.seed, int) or isinstance(self.seed, bool)
                                      or not -2**63 <= self.seed < 2**64):
            raise ValueError(f"seed must be an int in [-2**63, 2**64) or None, got {self.seed!r}")
        if self.seed is not None and self.seed + self.n > 2**64:  # sample i draws with seed + i
            raise ValueError(f"seed must be < 2**64 - {self.n - 1} with n={self.n} (sample i draws with seed + i), "
                             f"got {self.seed}")
        if self.stop is not None and (not isinstance(self.stop, list)
                                      or not all(isinstance(s, str) and s for s in self.stop)):
            raise ValueError(f"stop must be a non-empty string or a list of them, got {self.stop!r}")
        for name in ("presence_penalty", "frequency_penalty"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not -2.0 <= value <= 2.0:
                raise ValueError(f"{name} must be a number in [-2, 2], got {value!r}")
        if self.stop_token_ids is not None and (
                not isinstance(self.stop_token_ids, list)
                or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in self.stop_token_ids)):
            raise ValueError(f"stop_token_ids must be a list of token ids (ints >= 0), got {self.stop_token_ids!r}")
        if self.logit_bias is not None:
            if not isinstance(self.logit_bias, dict):
                raise ValueError(f"logit_bias must be a dict {{token id: bias}}, got {self.logit_bias!r}")
            for token, bias in self.logit_bias.items():
                if not isinstance(token, int) or isinstance(token, bool) or token < 0:
                    raise ValueError(f"logit_bias: {token!r} is not a token id (an int >= 0)")
                if not isinstance(bias, (int, float)) or isinstance(bias, bool) or not -100 <= bias <= 100:
                    raise ValueError(f"logit_bias[{token}] must be a number in [-100, 100], got {bias!r}")
        if self.response_format not in RESPONSE_FORMATS:
            raise ValueError(f"response_format must be one of {', '.join(map(repr, RESPONSE_FORMATS))}, "
                             f"got {self.response_format!r}")
        if (self.json_schema is not None) != (self.response_format == "json_schema"):
            raise ValueError("json_schema goes with response_format 'json_schema' (and that needs it), got "
                             f"response_format {self.response_format!r} and json_schema {self.json_schema!r}")
        if self.json_schema is not None:
            compile_schema(self.json_schema)  # ValueError naming what JSON mode cannot enforce
        for name, fmt, check in (("choices", "choice", compile_choice), ("regex", "regex", compile_regex)):
            if (getattr(self, name) is not None) != (self.response_format == fmt):
                raise ValueError(f"{name} goes with response_format {fmt!r} (and that needs it), got response_format "
                                 f"{self.response_format!r} and {name} {getattr(self, name)!r:.80}")
            if getattr(self, name) is not None:
                try:
                    check(getattr(self, name))  # ValueError naming what is wrong (a pattern's error: not the field)
                except ValueError as e:
                    raise ValueError(str(e) if str(e).startswith(name) else f"{name}: {e}") from None
        for name in ("reasoning_after", "reasoning_open", "continuation"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if (self.reasoning_after or self.reasoning_open) and self.response_format is None:
            raise ValueError("reasoning_after and reasoning_open go with a response_format (the JSON after the "
                             "reasoning)")
        if self.reasoning_open and not self.reasoning_after:
            raise ValueError("reasoning_open (the prompt opened a reasoning block) needs reasoning_after")
        if self.prediction is not None and not isinstance(self.prediction, str) and (
                not isinstance(self.prediction, list)
                or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in self.prediction)):
            raise ValueError(f"prediction must be a string or a list of token ids (ints >= 0), got "
                             f"{self.prediction!r:.80}")
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(map(repr, POOLINGS))}, got {self.pooling!r}")
        if self.pooling is not None and (self.response_format is not None or self.logprobs is not None
                                         or self.prompt_logprobs is not None):
            raise ValueError("pooling (an embedding request) takes no response_format, logprobs or prompt_logprobs")
        if self.pooling is not None and self.n != 1:
            raise ValueError(f"pooling (an embedding request) takes no n > 1 (its prompt has one embedding), got "
                             f"n={self.n}")
        if not isinstance(self.skip_special_tokens, bool):
            raise ValueError(f"skip_special_tokens must be True or False, got {self.skip_special_tokens!r}")
        if not isinstance(self.include_stop_str_in_output, bool):
            raise ValueError(f"include_stop_str_in_output must be True or False, got "
                             f"{self.include_stop_str_in_output!r}")
        if not isinstance(self.min_tokens, int) or isinstance(self.min_tokens, bool) or self.min_tokens < 0:
            raise ValueError(f"min_tokens must be an int >= 0, got {self.min_tokens!r}")
        if self.min_tokens > self.max_tokens:  # as vLLM: no answer could honour both
            raise ValueError(f"min_tokens must be <= max_tokens ({self.max_tokens}), got {self.min_tokens}")
        if not isinstance(self.min_p, (int, float)) or isinstance(self.min_p, bool) or not 0.0 <= self.min_p <= 1.0:
            raise ValueError(f"min_p must be a number in [0, 1], got {self.min_p!r}")
        rp = self.repetition_penalty
        if not isinstance(rp, (int, float)) or isinstance(rp, bool) or not 0.0 < rp <= MAX_REPETITION_PENALTY:
            raise ValueError(f"repetition_penalty must be a number in (0, {MAX_REPETITION_PENALTY:g}] (1 is off), "
                             f"got {rp!r}")
        for name in ("logprobs", "prompt_logprobs"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or not 0 <= value <= MAX_LOGPROBS):
                raise ValueError(f"{name} must be None or an int in [0, {MAX_LOGPROBS}], got {value!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature < MIN_TEMPERATURE or self.top_k == 1

    @property
    def penalized(self) -> bool:
        return bool(self.presence_penalty or self.frequency_penalty) or self.repetition_penalty != 1.0

    @property
    def device_greedy(self) -> bool:
        """Whether the argmax of the raw logits is all the request needs (decode windows on the device)."""
        return self.greedy and self.draftable

    @property
    def generates(self) -> bool:
        """Whether the request generates tokens (else its prompt may fill the context: an embedding's, or a
        prompt alone with ``max_tokens`` 0)."""
        return self.pooling is None and self.max_tokens > 0

    @property
    def draftable(self) -> bool:
        """Whether speculative decoding may give the request drafts: its next token depends on the logits of
        its position alone (temperature, top-k, top-p and min-p; no penalties, bias, min_tokens, logprobs or
        response format)."""
        return (not self.penalized and self.logprobs is None and not self.min_tokens and not self.logit_bias
                and self.response_format is None and self.generates)


@dataclasses.dataclass
class TokenLogprobs:
    """Log-probability of one sampled (or prompt) token and the ``top`` most likely tokens at its position
    ([(token id, log-probability)], most likely first); ``rank``: of a prompt token, 1 + the tokens strictly
    more likely there (None for sampled tokens)."""

    token_id: int
    logprob: float
    top: list[tuple[int, float]]
    rank: int | None = None


def apply_penalties(logits: torch.Tensor, params: list[SamplingParams], histories: list[list[int]],
                    prompts: list[list[int]] | None = None) -> torch.Tensor:
    """Presence, frequency and repetition penalties (see :class:`SamplingParams`); ``logits`` [S, V] is
    returned unchanged when no row has any, else a penalised copy. ``histories``: each row's generated token
    ids; ``prompts``: each row's prompt ids (needed only where a row has a repetition penalty)."""
    rows = [i for i, p in enumerate(params) if p.penalized]
    if not rows:
        return logits
    logits = logits.clone()
    vocab = logits.shape[-1]
    for i in rows:
        p = params[i]
        if p.repetition_penalty != 1.0:
            if prompts is None:
                raise ValueError("apply_penalties: rows with a repetition penalty need the prompts")
            seen = torch.tensor(sorted(set(prompts[i]) | set(histories[i])), dtype=torch.long, device=logits.device)
            row = logits[i, seen]
            logits[i, seen] = torch.where(row > 0, row / p.repetition_penalty, row * p.repetition_penalty)
        if not histories[i] or not (p.presence_penalty or p.frequency_penalty):
            continue
        counts = torch.bincount(torch.tensor(histories[i]), minlength=vocab)[:vocab].to(logits.device)   # [V]
        logits[i] -= p.frequency_penalty * counts + p.presence_penalty * (counts > 0)
    return logits


def token_logprobs(logits: torch.Tensor, tokens: list[int], params: list[SamplingParams]
                   ) -> list[TokenLogprobs | None]:
    """Each row's :class:`TokenLogprobs` for ``tokens`` (None where ``params.logprobs`` is None).
    logits: [S, V] fp32, the model's (before penalties and temperature)."""
    rows = [i for i, p in enumerate(params) if p.logprobs is not None]
    out: list[TokenLogprobs | None] = [None] * len(params)
    if not rows:
        return out
    lp = logits[rows].float().log_softmax(-1)                                                  # [R, V]
    k = max(params[i].logprobs for i in rows)
    chosen = lp.gather(-1, torch.tensor([tokens[i] for i in rows], device=lp.device)[:, None])  # [R, 1]
    top_v, top_i = lp.topk(k, dim=-1) if k else (lp[:, :0], lp[:, :0].long())                # [R, k]
    chosen, top_v, top_i = chosen[:, 0].tolist(), top_v.tolist(), top_i.tolist()
    for r, i in enumerate(rows):
        n = params[i].logprobs
        out[i] = TokenLogprobs(tokens[i], chosen[r], list(zip(top_i[r][:n], top_v[r][:n])))
    return out


def filter_logits(logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor,
                  min_p: torch.Tensor | None = None) -> torch.Tensor:
    """Mask (to -inf) tokens outside each row's top-k, top-p and min-p set.

    logits: [S, V] fp32 (already divided by temperature); top_k: [S] int (0: off); top_p: [S] fp32;
    min_p: [S] fp32 (0: off; None: off for every row).
    """
    sorted_logits, order = logits.sort(dim=-1, descending=True)                # [S, V]
    vocab = logits.shape[-1]
    ranks = torch.arange(vocab, device=logits.device)[None, :]
    k = torch.where(top_k > 0, top_k, torch.full_like(top_k, vocab))[:, None]
    drop = ranks >= k
    if min_p is not None:  # p / p_max = exp(logit - logit_max), the most likely token first
        drop |= (sorted_logits - sorted_logits[:, :1]).exp() < min_p[:, None]
    probs = sorted_logits.masked_fill(drop, float("-inf")).softmax(-1)
    # keep a token while the mass before it is < p (the first token is always kept)
    drop |= (probs.cumsum(-1) - probs) >= top_p[:, None]
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.empty_like(logits).scatter_(-1, order, sorted_logits)


def sampling_probs(logits: torch.Tensor, params: list[SamplingParams]) -> torch.Tensor:
    """[S, V] fp32: each row's distribution after temperature, top-k, top-p and min-p (a greedy row's at
    temperature 1)."""
    # NOTE: per-row parameters are built on the host and copied without blocking; torch.tensor(...,
    # device=cuda) would sync with the device for each of them.
    dev = logits.device
    temp = torch.tensor([p.temperature if not p.greedy else 1.0 for p in params]).to(dev, non_blocking=True)
    top_k = torch.tensor([p.top_k for p in params]).to(dev, non_blocking=True)
    top_p = torch.tensor([float(p.top_p) for p in params]).to(dev, non_blocking=True)
    min_p = torch.tensor([float(p.min_p) for p in params]).to(dev, non_blocking=True) \
        if any(p.min_p for p in params) else None
    return filter_logits(logits / temp[:, None], top_k, top_p, min_p).softmax(-1)


def seeded_generator(seed: int) -> torch.Generator:
    """The CPU generator a request with ``seed`` (in [-2**63, 2**64)) draws from.

    NOTE: torch's CPU generator (mt19937) keeps only the low 32 bits of its seed, so seeds 1, 2**32 + 1 and
    2**40 + 1 drew the same samples; a seed outside [0, 2**32) is first mixed down to 32 bits by splitmix64's
    finalizer (seeds in that range are taken as they are: their samples did not change)."""
    if not 0 <= seed < 2**32:
        mask = 2**64 - 1
        z = (seed + 0x9E3779B97F4A7C15) & mask
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        seed = (z ^ (z >> 31)) >> 32
    return torch.Generator().manual_seed(seed)


def draw(probs: torch.Tensor, generators: list[torch.Generator | None]) -> torch.Tensor:
    """One token per row of ``probs`` [S, V] (argmax of p / E, E ~ Exp(1): a draw from p); a row with a
    generator draws its own noise."""
    dev = probs.device
    noise = torch.empty_like(probs).exponential_()
    for i, g in enumerate(generators):
        if g is not None:
            row = torch.empty(probs.shape[-1], device=g.device).exponential_(generator=g)
            noise[i] = row.to(dev, non_blocking=True)
    return (probs / noise).argmax(-1)


def sample(logits: torch.Tensor, params: list[SamplingParams], generators: list[torch.Generator | None],
           histories: list[list[int]] | None = None, prompts: list[list[int]] | None = None,
           banned: list[list[int] | None] | None = None, allowed: list[torch.Tensor | None] | None = None
           ) -> list[int]:
    """One token per row. logits: [S, V] fp32; params, generators: one per row; ``histories``: each row's
    generated token ids (needed only when a row has penalties), ``prompts`` its prompt ids (only with a
    repetition penalty); ``banned``: per row, tokens it may not draw now (None: none; min_tokens);
    ``allowed``: per row, a bool ``[V]`` mask on the logits' device of the only tokens it may draw (None: any;
    JSON mode)."""
    if (banned is not None and any(banned)) or any(p.logit_bias for p in params) or (
            allowed is not None and any(a is not None for a in allowed)):
        logits = logits.clone()
        if allowed is not None:
            for i, mask in enumerate(allowed):
                if mask is not None:
                    logits[i].masked_fill_(~mask, float("-inf"))
        for i, p in enumerate(params):
            if p.logit_bias:
                ids = torch.tensor(list(p.logit_bias), dtype=torch.long).to(logits.device, non_blocking=True)
                bias = torch.tensor(list(p.logit_bias.values()), dtype=logits.dtype).to(logits.device, non_blocking=True)
                logits[i].index_add_(0, ids, bias)
            if banned is not None and banned[i]:
                logits[i, torch.tensor(banned[i], dtype=torch.long, device=logits.device)] = float("-inf")
    if any(p.penalized for p in params):
        if histories is None:
            raise ValueError("sample: rows with penalties need histories")
        logits = apply_penalties(logits, params, histories, prompts)
    if all(p.greedy for p in params):
        return logits.argmax(-1).tolist()
    dev = logits.device
    # the one sync of the step is the final .tolist()
    sampled = draw(sampling_probs(logits, params), generators)
    greedy = torch.tensor([p.greedy for p in params]).to(dev, non_blocking=True)
    return torch.where(greedy, logits.argmax(-1), sampled).tolist()


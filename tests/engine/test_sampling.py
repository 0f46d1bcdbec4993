"""Sampling: parameter validation, top-k/top-p filtering, seeds, greedy rows in mixed batches."""

import pytest
import torch

from tritium.engine.sampling import MIN_TEMPERATURE, SamplingParams, filter_logits, sample, seeded_generator


@pytest.mark.parametrize("kwargs,message", [
    (dict(max_tokens=-1), "max_tokens must be an int >= 0, got -1"),
    (dict(max_tokens=2.5), "max_tokens must be an int >= 0, got 2.5"),
    (dict(temperature=-1.0), "temperature must be a finite number >= 0, got -1.0"),
    (dict(temperature=float("nan")), "temperature must be a finite number >= 0, got nan"),
    (dict(temperature=float("inf")), "temperature must be a finite number >= 0, got inf"),
    (dict(temperature=True), "temperature must be a finite number >= 0, got True"),
    (dict(top_p=True), r"top_p must be in \(0, 1\], got True"),
    (dict(top_p=0.0), r"top_p must be in \(0, 1\], got 0.0"),
    (dict(top_p=1.5), r"top_p must be in \(0, 1\], got 1.5"),
    (dict(top_k=-2), "top_k must be an int >= 0"),
    (dict(seed="x"), r"seed must be an int in \[-2\*\*63, 2\*\*64\) or None, got 'x'"),
    (dict(seed=2**64), r"seed must be an int in \[-2\*\*63, 2\*\*64\) or None, got 18446744073709551616"),
    (dict(stop=[""]), "stop must be a non-empty string or a list of them"),
    (dict(min_p=1.5), r"min_p must be a number in \[0, 1\], got 1.5"),
    (dict(min_p=True), r"min_p must be a number in \[0, 1\], got True"),
    (dict(repetition_penalty=0.0), r"repetition_penalty must be a number in \(0, 10\] \(1 is off\), got 0.0"),
    (dict(repetition_penalty=float("inf")), r"repetition_penalty must be a number in \(0, 10\]"),
    (dict(stop_token_ids=[1, -2]), r"stop_token_ids must be a list of token ids \(ints >= 0\), got \[1, -2\]"),
    (dict(stop_token_ids=5), r"stop_token_ids must be a list of token ids"),
    (dict(min_tokens=-1), "min_tokens must be an int >= 0, got -1"),
    (dict(min_tokens=100, max_tokens=3), r"min_tokens must be <= max_tokens \(3\), got 100"),
    (dict(logit_bias=[1]), r"logit_bias must be a dict \{token id: bias\}, got \[1\]"),
    (dict(logit_bias={"5": 1.0}), "logit_bias: '5' is not a token id"),
    (dict(logit_bias={5: 150}), r"logit_bias\[5\] must be a number in \[-100, 100\], got 150"),
])
def test_invalid_params(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SamplingParams(**kwargs)


def test_stop_set_after_construction_is_a_list_when_checked():
    params = SamplingParams(stop="x")
    params.stop = "abc"  # validate() (the engine calls it for every request) takes it as at construction
    params.validate()
    assert params.stop == ["abc"]


def test_filter_top_k_and_top_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]] * 3))
    out = filter_logits(logits, torch.tensor([2, 0, 0]), torch.tensor([1.0, 0.7, 0.81]))
    kept = torch.isfinite(out)
    assert kept.tolist() == [[True, True, False, False],   # top-2
                             [True, True, False, False],   # 0.5 < 0.7 <= 0.8
                             [True, True, True, False]]    # 0.8 < 0.81
    assert torch.equal(out[kept], logits[kept])


def test_filter_min_p():
    """min_p keeps the tokens at least min_p times as likely as the most likely one, with top-k / top-p."""
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]] * 4))
    out = filter_logits(logits, torch.tensor([0, 0, 0, 1]), torch.tensor([1.0, 1.0, 0.7, 1.0]),
                        torch.tensor([0.0, 0.25, 0.1, 0.0]))
    assert torch.isfinite(out).tolist() == [[True, True, True, True],     # off
                                            [True, True, True, False],    # 0.15 >= 0.25 * 0.5 > 0.05
                                            [True, True, False, False],   # top-p the tighter
                                            [True, False, False, False]]  # top-k
    draws = sample(logits[:1].repeat(2000, 1), [SamplingParams(temperature=1.0, min_p=0.35)] * 2000, [None] * 2000)
    assert set(draws) == {0, 1}  # 0.15 / 0.5 < 0.35: never drawn


def test_logit_bias_moves_greedy_and_sampled_rows():
    logits = torch.tensor([[5.0, 1.0, 0.0]] * 2)
    params = [SamplingParams(logit_bias={2: 10.0, 0: -3.0}), SamplingParams()]
    assert not params[0].device_greedy
    assert sample(logits, params, [None, None]) == [2, 0] and logits[0, 2] == 0.0
    draws = sample(logits.repeat(500, 1), [SamplingParams(temperature=1.0, logit_bias={0: -100, 1: -100})] * 1000,
                   [None] * 1000)
    assert set(draws) == {2}


def test_banned_tokens_are_never_drawn():
    logits = torch.tensor([[5.0, 1.0, 0.0], [5.0, 1.0, 0.0]])
    assert sample(logits, [SamplingParams(), SamplingParams()], [None, None], banned=[[0], None]) == [1, 0]
    draws = sample(logits.repeat(500, 1), [SamplingParams(temperature=1.0)] * 1000, [None] * 1000,
                   banned=[[0, 1]] * 1000)
    assert set(draws) == {2} and logits[0, 0] == 5.0  # the input is not modified


def test_seeded_sampling_is_reproducible_and_batch_independent():
    torch.manual_seed(1)
    logits = torch.randn(3, 50)
    p = SamplingParams(temperature=1.0, seed=7)
    draws = [sample(logits[:1], [p], [torch.Generator().manual_seed(7)]) for _ in range(2)]
    assert draws[0] == draws[1]
    # the same seeded row inside a batch with other rows draws the same token
    mixed = sample(logits[[0, 1, 2]], [p, SamplingParams(temperature=1.0), SamplingParams()],
                   [torch.Generator().manual_seed(7), None, None])
    assert mixed[0] == draws[0][0]
    assert mixed[2] == int(logits[2].argmax())  # greedy row stays greedy


def test_every_bit_of_a_seed_counts():
    """Seeds that differ only above bit 32 (torch's CPU generator keeps 32) draw differently; a seed in [0, 2**32)
    draws as torch.Generator().manual_seed(seed) does, and -1 is not 0."""
    def noise(seed):
        return torch.empty(8).exponential_(generator=seeded_generator(seed)).tolist()

    seeds = [1, 2**32 + 1, 2**40 + 1, 2**63 + 1, -2, 0, -1, 2**64 - 1, 2**32, 2**33]
    draws = [noise(s) for s in seeds]
    assert len({tuple(d) for d in draws}) == len(seeds) - 1 and draws[6] == draws[7]  # -1 is 2**64 - 1 (mod 2**64)
    for seed in (0, 7, 2**32 - 1):
        assert noise(seed) == torch.empty(8).exponential_(generator=torch.Generator().manual_seed(seed)).tolist()
    assert noise(2**40 + 1) == noise(2**40 + 1)


def test_temperatures_near_zero_are_greedy():
    """A temperature too small for fp32 (logits / 1e-38 overflow to +-inf, a NaN softmax) takes the argmax, as 0
    does, not token 0; one above MIN_TEMPERATURE still samples."""
    torch.manual_seed(2)
    logits = torch.randn(4, 50)
    for temperature in (1e-6, 1e-30, 1e-38, 1e-300, 5e-324):
        params = [SamplingParams(temperature=temperature, seed=0), SamplingParams(temperature=1.0)] * 2
        tokens = sample(logits, params, [torch.Generator().manual_seed(0), None] * 2)
        assert params[0].greedy and tokens[0::2] == logits[0::2].argmax(-1).tolist(), temperature
    assert not SamplingParams(temperature=MIN_TEMPERATURE).greedy


def test_temperature_sampling_follows_distribution():
    logits = torch.log(torch.tensor([[0.7, 0.2, 0.1]])).repeat(4000, 1)
    tokens = torch.tensor(sample(logits, [SamplingParams(temperature=1.0)] * 4000, [None] * 4000))
    freq = torch.bincount(tokens, minlength=3).float() / 4000
    assert torch.allclose(freq, torch.tensor([0.7, 0.2, 0.1]), atol=0.04)
    topk1 = sample(logits[:5], [SamplingParams(temperature=2.0, top_k=1)] * 5, [None] * 5)
    assert topk1 == [0] * 5


def test_seeds_apart_above_bit_32_answer_apart(tiny_models):
    """Requests seeded 5 and 2**32 + 5 answered alike (torch's CPU generator kept 32 bits); 5 twice still does."""
    from tritium import LLM

    llm = LLM(tiny_models["llama"][0], dtype=torch.float32, max_model_len=64)
    params = [SamplingParams(max_tokens=12, temperature=1.0, seed=s, ignore_eos=True) for s in (5, 2**32 + 5, 5)]
    a, b, c = llm.generate(["w1 w2"] * 3, params)
    assert a.token_ids == c.token_ids != b.token_ids

"""Issue 40, item 2: prefix-cached sampling. A prompt's n responses are sampled from one prefill of it; the same
tokens as today for the same keys."""

import pytest
import torch

PROMPTS = ["12+34=", "5+5=", "333+1=", "7+80="]


def _tokens_and_logprobs(policy, prefill_once: bool, **options):
    policy.prefill_once = prefill_once
    out = policy.generate(PROMPTS, **options)
    return [[g.token_ids for g in group] for group in out], [[g.logprobs for g in group] for group in out]


def _smollm2_shaped(tiny_policy):
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=tiny_policy.model.config.vocab_size, hidden_size=576, intermediate_size=1536,
                         num_hidden_layers=2, num_attention_heads=9, num_key_value_heads=3, rope_theta=100000.0,
                         tie_word_embeddings=True, max_position_embeddings=2048,
                         pad_token_id=tiny_policy.tokenizer.pad_token_id)
    torch.manual_seed(0)
    tiny_policy.model = LlamaForCausalLM(config)
    return tiny_policy


@pytest.mark.parametrize("architecture", ["tiny", "smollm2"])
@pytest.mark.parametrize("greedy", [False, True])
def test_prefix_cached_sampling_draws_todays_tokens(tiny_policy, architecture, greedy):
    policy = _smollm2_shaped(tiny_policy) if architecture == "smollm2" else tiny_policy
    options = dict(n=4, max_new_tokens=8, seed=3, greedy=greedy)
    today_tokens, today_logprobs = _tokens_and_logprobs(policy, False, **options)
    cached_tokens, cached_logprobs = _tokens_and_logprobs(policy, True, **options)
    assert cached_tokens == today_tokens
    for group_today, group_cached in zip(today_logprobs, cached_logprobs):
        for a, b in zip(group_today, group_cached):
            assert b == pytest.approx(a, abs=1e-5)
    if not greedy:   # (the untrained tiny model's greedy answer is one token repeated)
        assert len({tuple(t) for group in today_tokens for t in group}) > 1


def test_each_prompt_is_prefilled_once(tiny_policy):
    """What runs through the model: one prefill of the 4 distinct prompts (their tokens but the last), then
    generate() starts from the cache with one token per row; today every one of the 16 rows runs its prompt."""
    calls = []
    tiny_policy.model.register_forward_pre_hook(
        lambda module, args, kwargs: calls.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    width = max(len(ids) for ids in tiny_policy.encode_prompts(PROMPTS))
    for prefill_once in (False, True):
        calls.clear()
        tiny_policy.prefill_once = prefill_once
        tiny_policy.generate(PROMPTS, n=4, max_new_tokens=3, seed=0)
        expected_first = [(16, width)] if not prefill_once else [(4, width - 1), (16, 1)]
        assert calls[:len(expected_first)] == expected_first
        assert all(shape == (16, 1) for shape in calls[len(expected_first):])


def test_rows_with_distinct_prompts_are_not_prefilled(tiny_policy):
    calls = []
    tiny_policy.model.register_forward_pre_hook(
        lambda module, args, kwargs: calls.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    tiny_policy.prefill_once = True
    tiny_policy.generate(PROMPTS, n=1, max_new_tokens=2, seed=0)
    assert calls[0][0] == 4 and calls[0][1] == max(len(ids) for ids in tiny_policy.encode_prompts(PROMPTS))


def test_the_config_switches_it_on_for_both_players(tmp_path):
    from genenv.config import TinyModelConfig, load_config
    from genenv.models.tiny import build_tiny_policy
    from genenv.players import make_players
    cfg = load_config("smoke", ["prefix_cached_sampling=true"])
    tiny = TinyModelConfig(hidden_size=16, intermediate_size=32, num_layers=1, num_heads=2, max_positions=48)
    players = make_players(cfg, build_tiny_policy(tiny, "0123456789+= ", seed=0),
                           build_tiny_policy(tiny, "0123456789+= ", seed=1))
    assert players.agent.prefill_once and players.env.prefill_once

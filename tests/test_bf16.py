"""Issue 40, item 4: bf16 autocast with float32 master weights."""

import torch

from genenv.algos.grpo import PolicySample, grpo_step


def test_autocast_runs_the_forward_in_bf16_and_keeps_float32_weights(tiny_policy):
    batch = tiny_policy.build_batch([[1, 5, 6, 7]] * 2, [[8, 9], [10]])
    fp32, _ = tiny_policy.token_logprobs(batch)
    tiny_policy.autocast_bf16 = True
    seen = []
    handle = tiny_policy.model.model.layers[0].mlp.down_proj.register_forward_hook(
        lambda module, inputs, output: seen.append(output.dtype))
    bf16, _ = tiny_policy.token_logprobs(batch)
    handle.remove()
    assert seen == [torch.bfloat16] and bf16.dtype == torch.float32
    mask = batch.response_mask.bool()
    assert not torch.equal(bf16[mask], fp32[mask]) and torch.allclose(bf16[mask], fp32[mask], atol=0.1)
    reference = tiny_policy.frozen_copy()
    optimizer = torch.optim.AdamW(tiny_policy.model.parameters(), lr=1e-3)
    samples = [PolicySample([1, 5, 6, 7], [8, 9], [-2.0, -2.0], 1.0), PolicySample([1, 5, 6, 7], [10], [-2.0], -1.0)]
    stats = grpo_step(tiny_policy, reference, optimizer, samples, kl_coef=0.1)
    assert stats["skipped"] == 0
    assert all(p.dtype == torch.float32 for p in tiny_policy.model.parameters())
    assert all(state["exp_avg"].dtype == torch.float32 for state in optimizer.state.values())


def test_the_config_sets_autocast_on_both_players_and_their_kl_references():
    from genenv.config import TinyModelConfig, load_config
    from genenv.models.tiny import build_tiny_policy
    from genenv.players import make_players
    tiny = TinyModelConfig(hidden_size=16, intermediate_size=32, num_layers=1, num_heads=2, max_positions=48)
    players = make_players(load_config("smoke", ["autocast=bfloat16"]),
                           build_tiny_policy(tiny, "0123456789+= ", seed=0), build_tiny_policy(tiny, "0123456789+= ",
                                                                                               seed=1))
    assert players.agent.autocast_bf16 and players.agent_ref.autocast_bf16
    assert players.env.autocast_bf16 and players.env_ref.autocast_bf16
    plain = make_players(load_config("smoke"), build_tiny_policy(tiny, "0123456789+= ", seed=0),
                         build_tiny_policy(tiny, "0123456789+= ", seed=1))
    assert not any(p.autocast_bf16 for p in (plain.agent, plain.agent_ref, plain.env, plain.env_ref))

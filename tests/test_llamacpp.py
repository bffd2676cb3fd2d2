"""Issue 40, item 3: ``{agent,env}.sampler=llama.cpp``. Tokens drawn by the policy's own rule from llama.cpp's logits,
the weights synced after a change, old log-probs recomputed by the trainer, and clear refusals."""

import numpy as np
import pytest
import torch

from genenv.algos.grpo import PolicySample, with_trainer_logprobs
from genenv.config import ConfigError, load_config
from genenv.models.policy import keyed_draw, sample_by_inverse_cdf
from genenv.seeding import grid_keys, sequence_uniforms


def test_a_token_is_drawn_by_the_policys_inverse_cdf_rule():
    """keyed_draw (what both the transformers path and llama.cpp's rows go through) picks the token
    sample_by_inverse_cdf picks from softmax(logits / T) with the same uniform, at any temperature, and returns its
    log-prob under softmax(logits / T)."""
    rng = np.random.default_rng(0)
    for temperature in (1.0, 0.7, 1.5):
        logits = torch.from_numpy(rng.normal(size=(200, 50)).astype(np.float32) * 3)
        uniforms = torch.from_numpy(rng.random(200))
        logprobs = torch.log_softmax(logits / temperature, dim=-1)
        expected = sample_by_inverse_cdf(logprobs, uniforms).tolist()
        tokens, drawn_logprobs = keyed_draw(logits, temperature, uniforms)
        assert tokens.tolist() == expected
        assert drawn_logprobs.tolist() == pytest.approx(
            [float(logprobs[i, t]) for i, t in enumerate(expected)], abs=1e-9)
    top = keyed_draw(torch.tensor([[0.0, 5.0, 0.0]]), 1.0, torch.tensor([0.999999], dtype=torch.float64))[0]
    assert top.tolist() == [2]   # the top of the CDF


@pytest.mark.parametrize("shared_prefix, micro_batch", [(False, 0), (True, 0), (True, 3), (False, 2)])
def test_old_logprobs_are_recomputed_by_the_trainer_in_the_buffers_order(tiny_policy, shared_prefix, micro_batch):
    """Samples another engine drew carry its log-probs; with_trainer_logprobs replaces them with the policy's own
    (what token_logprobs gives each sample alone), keeps tokens and advantages, and returns the groups in their
    order even when micro-batches regroup them by length."""
    prompts = [tiny_policy.encode_prompt(text) for text in ("s5|12+34>", "s1|1+2>", "s9|123+456>")]
    groups = [[PolicySample(prompt, [3 + k, 4, 5 + g][:1 + (k + g) % 3], [-9.0] * 3, float(k - 1))
               for k in range(3)] for g, prompt in enumerate(prompts)]
    out = with_trainer_logprobs(tiny_policy, groups, micro_batch=micro_batch, shared_prefix=shared_prefix)
    assert [[s.response_ids for s in g] for g in out] == [[s.response_ids for s in g] for g in groups]
    assert [[s.advantage for s in g] for g in out] == [[s.advantage for s in g] for g in groups]
    for group in out:
        for sample in group:
            with torch.no_grad():
                alone = tiny_policy.token_logprobs(tiny_policy.build_batch([sample.prompt_ids],
                                                                           [sample.response_ids]))[0][0]
            assert len(sample.old_logprobs) == len(sample.response_ids)
            assert sample.old_logprobs == pytest.approx(alone.tolist(), abs=1e-5)


def test_a_model_llama_cpp_cannot_decode_is_refused_naming_the_field(tiny_policy):
    """A model llama.cpp cannot decode (the tiny model's character tokenizer) is refused, naming the field and why
    (issue 94: one rule for every decoder and entry point; it was decoded by transformers before); llama.cpp beside
    Ray workers is refused."""
    from genenv.models.samplers import sampler_problem
    from genenv.players import player_sampler
    cfg = load_config("smoke", ["agent.sampler=llama.cpp"])
    expected = ("agent.sampler: llama.cpp cannot decode 'tiny': its tokenizer is a character one, not a BPE; or set "
                "agent.sampler=transformers")
    assert sampler_problem("agent.sampler", "llama.cpp", "tiny", "cpu") == expected
    with pytest.raises(ConfigError) as refused:
        player_sampler(cfg, "agent", tiny_policy, cfg.agent)
    assert str(refused.value) == expected
    with pytest.raises(ConfigError, match=r"env\.sampler: llama.cpp runs in the run's process"):
        load_config("smollm2-apibank", ["env.sampler=llama.cpp", "engine.workers=2"])
    with pytest.raises(ConfigError, match=r"llamacpp\.dtype: 'q4' is not allowed"):
        load_config("smollm2-apibank", ["agent.sampler=llama.cpp", "llamacpp.dtype=q4"])
    with pytest.warns(FutureWarning, match=r"agent\.sampler_dtype is deprecated: write agent\.llamacpp\.dtype"):
        cfg = load_config("smollm2-apibank", ["agent.sampler=llama.cpp", "agent.sampler_dtype=q8_0"])
    assert cfg.llamacpp.dtype == "q8_0"


@pytest.fixture(scope="module")
def smollm2_on_llama_cpp():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (`make install` builds it)")
    from genenv.models.llamacpp import LlamaCppSampler
    from genenv.models.policy import Policy
    from genenv.models.registry import KNOWN_MODELS, ModelNotAvailable, packaged_file, resolve_model
    try:
        policy = Policy.load(resolve_model("smollm2"), use_chat_template=True)
        template = packaged_file(KNOWN_MODELS["smollm2"])
    except ModelNotAvailable as err:
        print(f"skipped: {err}")
        pytest.skip(str(err))
    sampler = LlamaCppSampler(policy, template, threads=2, dtype="f32", context=1024, parallel=4)
    yield policy, sampler
    sampler.close()


@pytest.mark.slow
def test_smollm2_on_llama_cpp_answers_as_transformers_and_follows_the_weights(smollm2_on_llama_cpp):
    """f32 weights and KV cache: every greedy token is transformers' argmax given the same prefix, up to a rounding
    tie (its logit within 0.01 of the top one: "Say hello." has one, 2.5e-4 apart, at its second token), and one
    prompt's 4 copies decoded side by side answer as it does alone; sampled responses keep the keyed draw (most
    equal to transformers', every token's log-prob near the trainer's); an in-place change of a weight is synced
    before the next generation, nothing else is."""
    policy, sampler = smollm2_on_llama_cpp
    prompts = ["What is the capital of France?", "Call the weather API for Paris tomorrow.", "Say hello."]
    ids = policy.encode_prompts(prompts)
    reference = policy.generate(prompts, max_new_tokens=16, greedy=True)
    sampled_reference = policy.generate(prompts, n=4, max_new_tokens=12, temperature=1.0, seed=7)
    policy.sampler = sampler
    try:
        greedy = policy.generate(prompts, max_new_tokens=16, greedy=True)
        for answer in greedy:
            tokens = answer[0].token_ids
            with torch.no_grad():
                logits = policy.model(input_ids=torch.tensor([answer[0].prompt_ids + tokens])).logits[0]
            steps = logits[len(answer[0].prompt_ids) - 1:-1]
            chosen = steps.gather(1, torch.tensor(tokens).unsqueeze(1)).squeeze(1)
            assert bool((chosen >= steps.max(-1).values - 0.01).all()), (tokens, steps.max(-1).values - chosen)
        assert sum(a[0].token_ids == b[0].token_ids for a, b in zip(greedy, reference)) >= 2
        together = sampler.sample([ids[0]], 4, 16, 1.0, None)[0]
        extended = ids[0][:-1] + policy.encode_prompts(["Paris?"])[0]   # shares all but its last tokens
        decoded = sampler.prefilled_tokens
        sampler.sample([extended], 1, 1, 1.0, None)
        assert sampler.prefilled_tokens - decoded == len(extended) - (len(ids[0]) - 1)   # only what is not shared
        assert [tokens for tokens, _ in together] == [greedy[0][0].token_ids] * 4
        sampled = policy.generate(prompts, n=4, max_new_tokens=12, temperature=1.0, seed=7)
        pairs = [(a, b) for ga, gb in zip(sampled_reference, sampled) for a, b in zip(ga, gb)]
        assert sum(a.token_ids == b.token_ids for a, b in pairs) >= 4      # of 12: the same keyed draws
        uniforms = sequence_uniforms(7, grid_keys(0, 3, 4), 12)
        for row, (_, b) in enumerate(pairs):
            with torch.no_grad():   # the trainer's distribution at each step of the engine's response
                logits = policy.model(input_ids=torch.tensor([b.prompt_ids + b.token_ids])).logits[0]
            probs = torch.softmax(logits[len(b.prompt_ids) - 1:-1].double(), -1)
            below = torch.cumsum(probs, -1) - probs                          # the CDF before each token
            for t, token in enumerate(b.token_ids):   # the keyed uniform falls in the token's slice of the CDF
                assert below[t, token] - 2e-3 <= uniforms[row, t] <= below[t, token] + probs[t, token] + 2e-3
            trainer = probs.gather(1, torch.tensor(b.token_ids).unsqueeze(1)).log().squeeze(1).tolist()
            assert b.logprobs == pytest.approx(trainer, abs=0.1)   # the engine's own (0.06 apart seen): a record only
        syncs = sampler.syncs
        policy.generate(prompts[:1], max_new_tokens=2, greedy=True)
        assert sampler.syncs == syncs                                      # unchanged weights: no sync
        with torch.no_grad():
            policy.model.lm_head.weight[reference[0][0].token_ids[0]] -= 100.0   # the first greedy token, buried
        changed = policy.generate(prompts[:1], max_new_tokens=2, greedy=True)[0][0].token_ids
        assert sampler.syncs == syncs + 1 and changed[0] != reference[0][0].token_ids[0]
    finally:
        policy.sampler = None


@pytest.mark.parametrize("recompute", [False, True])
def test_grpo_update_trains_on_the_trainers_old_logprobs_when_asked(tiny_policy, recompute):
    """Samples carrying another engine's log-probs (here 0.5 nats above the policy's): without recomputing, the first
    step's importance ratios sit outside the clip range (clip fraction > 0); with recompute_old_logprobs (what the
    loop passes under sampler=llama.cpp) they are the trainer's own, ratio 1, nothing clipped."""
    from genenv.algos.grpo import grpo_update

    prompt = tiny_policy.encode_prompt("s5|12+34>")
    samples = []
    for response, advantage in (("46", 1.0), ("99", -1.0)):
        ids = tiny_policy.encode_target(response)
        with torch.no_grad():
            own = tiny_policy.token_logprobs(tiny_policy.build_batch([prompt], [ids]))[0][0].tolist()
        samples.append(PolicySample(prompt, ids, [lp + 0.5 for lp in own], advantage))
    opt = torch.optim.AdamW(tiny_policy.model.parameters(), lr=1e-3)
    steps, skipped = grpo_update(tiny_policy, None, opt, [samples], rng=np.random.default_rng(0), passes=1,
                                 minibatch_groups=1, recompute_old_logprobs=recompute, clip_eps=0.2)
    assert skipped == 0 and len(steps) == 1
    assert (steps[0]["clip_fraction"] == 0.0) == recompute


def test_eval_refuses_llama_cpp_for_a_model_without_a_packaged_gguf(tmp_path, capsys):
    """`genenv eval --sampler llama.cpp` on a model llama.cpp cannot decode, or with an unknown weight type: one line
    naming the flag, before any model loads."""
    from genenv.cli import main
    from genenv.eval_driver import load_eval_policy
    out = tmp_path / "eval"
    assert main(["eval", "--benchmark", "heldout", "--model", "tiny", "--sampler", "llama.cpp", "--preset", "smoke",
                 "--out", str(out)]) == 2
    assert "genenv: --sampler: llama.cpp cannot decode 'tiny'" in capsys.readouterr().err and not out.exists()
    with pytest.raises(ValueError, match="--sampler: 'sglang' is not"):
        load_eval_policy("smollm2", print, "cpu", 1, sampler="sglang")
    with pytest.raises(ValueError, match="--sampler-dtype: 'q4_k' is not one of f32, f16, bf16, q8_0"):
        load_eval_policy("smollm2", print, "cpu", 1, sampler="llama.cpp", sampler_dtype="q4_k")


def test_greedy_answers_on_llama_cpp_go_in_token_order_over_all_prompts_and_come_back_in_theirs():
    """llama.cpp keeps the KV cells a prompt shares with the one before it, so genenv eval decodes the prompts in
    token order over all of them (API-Bank level 1: 74% of the prompt tokens shared with the previous prompt), not
    slice by slice; every answer returns to its prompt's place. On transformers the order is today's."""
    from genenv.eval_driver import greedy_with_progress
    from genenv.models.policy import Generation

    class Recording:
        sampler, decoded = object(), []

        def encode_prompts(self, prompts):
            return [[int(c) for c in p] for p in prompts]

        def generate(self, prompts, greedy, max_new_tokens, batch_size, prompt_ids):
            self.decoded += prompts
            return [[Generation(ids, [], f"answer {p}", [], True)] for p, ids in zip(prompts, prompt_ids)]

    prompts = [f"{n:03d}" for n in [512, 105, 511, 104, 300, 103, 999, 102, 101, 100] * 2]
    policy = Recording()
    answers = greedy_with_progress(policy, prompts, 4, 1, "test")
    assert answers == [f"answer {p}" for p in prompts]
    assert policy.decoded == sorted(prompts)       # 20 prompts in slices of 8: token order across the slices


def test_windows_cover_every_sample_once_within_the_sequences_and_cells():
    """The samples of several prompts go in windows of jobs (prompt, first sample, count): every sample once, in
    order; no window over ``parallel`` sequences or over the context's cells (a prompt's cells counted once, less
    what it shares with the prompt before it in the window, plus max_new_tokens per sample)."""
    from genenv.models.llamacpp import LlamaCppSampler
    from genenv.models.packing import common_prefix_length

    sampler = LlamaCppSampler.__new__(LlamaCppSampler)   # the planning needs no engine
    sampler.parallel, sampler.context = 4, 200
    prompts = [[1, 2, 3] + [7] * 40, [1, 2, 3] + [7] * 38 + [8, 9], [5] * 60, [5] * 60 + [6], [9] * 10]
    for n, new in ((1, 16), (3, 16), (6, 8), (2, 60)):
        windows = sampler._windows(prompts, n, new)
        jobs = [job for window in windows for job in window]
        assert [(i, s) for i, first, count in jobs for s in range(first, first + count)] == \
            [(i, s) for i in range(len(prompts)) for s in range(n)]
        for window in windows:
            assert sum(count for _, _, count in window) <= sampler.parallel
            cells = len(prompts[window[0][0]]) + sum(
                len(prompts[i]) - common_prefix_length([prompts[window[k - 1][0]], prompts[i]]) for k, (i, _, _) in
                enumerate(window) if k) + new * sum(count for _, _, count in window)
            assert cells <= sampler.context
    assert sampler._windows(prompts, 1, 16) == [[(0, 0, 1), (1, 0, 1), (2, 0, 1), (3, 0, 1)], [(4, 0, 1)]]
    assert len(sampler._windows(prompts, 1, 60)) > 2       # the cells, not the sequences, cut these windows


@pytest.mark.slow
def test_prompts_decoded_side_by_side_answer_as_each_alone(smollm2_on_llama_cpp):
    """Four prompts in one window (greedy) and two prompts' six samples each in windows of four sequences (keyed
    draws) give the tokens each prompt gets decoded alone; a prompt that shares its start with the one before it in
    the window prefills only the rest."""
    from genenv.models.packing import common_prefix_length

    policy, sampler = smollm2_on_llama_cpp
    ids = policy.encode_prompts(["What is the capital of France?", "What is the capital of Spain?",
                                 "Call the weather API for Paris tomorrow.", "Say hello."])
    alone = [sampler.sample([p], 1, 16, 1.0, None)[0] for p in ids]
    sampler.sample([[2, 3]], 1, 1, 1.0, None)   # the cache holds nothing of the prompts (each starts with 1)
    decoded = sampler.prefilled_tokens
    together = sampler.sample(ids, 1, 16, 1.0, None)
    shared = sum(min(common_prefix_length(ids[k - 1:k + 1]), len(ids[k]) - 1) for k in range(1, 4))
    assert sampler.prefilled_tokens - decoded == sum(map(len, ids)) - shared and shared > 20
    assert together == alone
    uniforms = torch.from_numpy(sequence_uniforms(7, grid_keys(0, 2, 6), 12))
    one_by_one = [sampler.sample([p], 6, 12, 1.0, uniforms[i * 6:(i + 1) * 6])[0] for i, p in enumerate(ids[:2])]
    assert sampler.sample(ids[:2], 6, 12, 1.0, uniforms) == one_by_one


@pytest.mark.slow
def test_a_stop_on_llama_cpp_cuts_each_answer_where_it_says_and_nothing_before(smollm2_on_llama_cpp):
    """Policy.generate's ``stop`` on the llama.cpp sampler: four answers side by side, each cut at the first token
    ``stop`` says True for, the tokens before it the ones decoded without it (those still decoding go on when
    another stops)."""
    policy, sampler = smollm2_on_llama_cpp
    ids = policy.encode_prompts(["What is the capital of France?", "What is the capital of Spain?",
                                 "Call the weather API for Paris tomorrow.", "Say hello."])

    def stop(tokens):   # after 2-8 tokens, how many set by the first
        return len(tokens) >= 2 + tokens[0] % 7

    whole = [tokens for [(tokens, _)] in sampler.sample(ids, 1, 16, 1.0, None)]
    stopped = [tokens for [(tokens, _)] in sampler.sample(ids, 1, 16, 1.0, None, stop=stop)]
    expected = [next((t[:n] for n in range(1, len(t) + 1) if t[n - 1] != policy.eos_token_id and stop(t[:n])), t)
                for t in whole]
    assert stopped == expected
    assert len({len(t) for t in stopped}) > 1 and any(len(s) < len(t) for s, t in zip(stopped, whole))


@pytest.mark.slow
def test_a_constrained_simulator_on_llama_cpp_writes_only_the_shape_as_on_transformers(smollm2_on_llama_cpp):
    """env.constrained on the llama.cpp sampler: the same masks before the same keyed draw, so every response has
    the domain's shape, and the trainer's constrained log-probs score it (its record only: the engine's logits)."""
    import re

    from genenv.constrained import TokenConstraint
    from genenv.domains import make_domain
    policy, sampler = smollm2_on_llama_cpp
    domain = make_domain("addition", width=3)
    vocab = int(policy.model.get_output_embeddings().weight.shape[0])
    shape = re.compile(domain.task_shape().regex)
    prompts = ["Write an addition task like 123+456.", "Another one, please."]
    constraint = TokenConstraint(domain.task_shape(), policy.tokenizer, vocab, policy.eos_token_id, "addition")
    try:
        reference = policy.generate(prompts, n=2, max_new_tokens=12, temperature=1.0, seed=3, constraint=constraint)
        policy.sampler = sampler
        engine = policy.generate(prompts, n=2, max_new_tokens=12, temperature=1.0, seed=3, constraint=constraint)
        for group in (*reference, *engine):
            assert all(g.finished and shape.fullmatch(g.text) for g in group), [g.text for g in group]
        same = sum(a.token_ids == b.token_ids for ga, gb in zip(reference, engine) for a, b in zip(ga, gb))
        assert same >= 2   # of 4: the same keyed draws where the two engines' logits agree
    finally:
        policy.sampler = None


def test_auto_decodes_on_llama_cpp_only_where_it_can(monkeypatch):
    """--sampler auto: llama.cpp for a packaged model on the CPU with llama-cpp-python importable; transformers for a
    model llama.cpp cannot decode (a Hugging Face folder, a run's weights), on cuda, or without the package."""
    import importlib.util

    from genenv.eval_driver import eval_sampler

    found = {"llama_cpp": object()}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: found.get(name))
    assert eval_sampler("auto", "smollm2", "cpu") == "llama.cpp"
    assert eval_sampler("auto", "runs/try/agent", "cpu") == "transformers"   # no such folder
    assert eval_sampler("auto", "smollm2", "cuda") == "transformers"
    assert eval_sampler("transformers", "smollm2", "cpu") == "transformers"
    found.clear()
    assert eval_sampler("auto", "smollm2", "cpu") == "transformers"


def test_a_model_folder_in_a_packaged_models_image_is_decoded_on_llama_cpp(tmp_path, monkeypatch):
    """A trained agent's folder (the packaged model's architecture and tokenizer, its own weights) is written in the
    packaged GGUF's image, so llama.cpp decodes it and --sampler auto picks it; a folder differing in one
    architecture field is not in the image (its GGUF is written from the folder itself, issue 78); an architecture,
    a rope scaling or a tokenizer the writer does not carry is refused with the reason."""
    import importlib.util
    import json
    import shutil

    from genenv.eval_driver import eval_sampler
    from genenv.models.registry import KNOWN_MODELS, llamacpp_refusal, packaged_image

    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    base = tmp_path / "cache" / "models" / KNOWN_MODELS["smollm2"].folder
    base.mkdir(parents=True)
    config = {"model_type": "llama", "vocab_size": 5, "hidden_size": 8, "num_hidden_layers": 2,
              "tie_word_embeddings": True, "eos_token_id": 2, "torch_dtype": "float32"}
    tokenizer = {"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []},
                 "added_tokens": [{"id": 2, "content": "<|im_end|>"}]}
    (base / "config.json").write_text(json.dumps(config))
    (base / "tokenizer.json").write_text(json.dumps(tokenizer))
    trained = tmp_path / "run" / "final" / "agent"
    shutil.copytree(base, trained)
    (trained / "config.json").write_text(json.dumps({**config, "torch_dtype": "bfloat16", "_name_or_path": "x"}))
    assert packaged_image(str(trained)) == "smollm2" and llamacpp_refusal(str(trained)) is None
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "llama_cpp" else None)
    assert eval_sampler("auto", str(trained), "cpu") == "llama.cpp"

    (trained / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 3}))
    assert packaged_image(str(trained)) is None   # not in the image: its GGUF is written from the folder itself
    assert llamacpp_refusal(str(trained)) is None and eval_sampler("auto", str(trained), "cpu") == "llama.cpp"
    (trained / "config.json").write_text(json.dumps({**config, "model_type": "gpt2"}))
    assert "architecture 'gpt2' is not written as GGUF here" in llamacpp_refusal(str(trained))
    assert eval_sampler("auto", str(trained), "cpu") == "transformers"
    (trained / "config.json").write_text(json.dumps({**config, "rope_scaling": {"rope_type": "yarn", "factor": 4}}))
    assert "rope scaling" in llamacpp_refusal(str(trained))
    (trained / "tokenizer.json").write_text(json.dumps({**tokenizer, "model": {"type": "WordLevel", "vocab": {}}}))
    (trained / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 3}))
    assert "its tokenizer is 'WordLevel', not a BPE" in llamacpp_refusal(str(trained))
    (trained / "config.json").write_text(json.dumps(config))
    (trained / "tokenizer.json").write_text(json.dumps({**tokenizer, "added_tokens": []}))
    assert packaged_image(str(trained)) is None
    (trained / "tokenizer.json").write_text("{not json")
    assert packaged_image(str(trained)) is None
    shutil.rmtree(base)   # nothing converted on this machine: nothing to compare with
    (trained / "tokenizer.json").write_text(json.dumps(tokenizer))
    assert packaged_image(str(trained)) is None


CRASH_REPRODUCER = """
import sys
import llama_cpp
model = llama_cpp.Llama(model_path=sys.argv[1], n_threads=2, n_ctx=512, n_batch=512, verbose=False)
tokens = model.tokenize(b"Call the weather API for Paris tomorrow, and say which arguments you pass.")
model.eval(tokens)   # the first multi-token prompt: where the native build's AMX kernels crashed
print("decoded", len(tokens))
"""


@pytest.mark.slow
def test_the_installed_build_decodes_a_quantized_models_multi_token_prompt():
    """The crash that made the build portable (docs/llamacpp.md, issue 60): the native build's AMX kernels segfaulted
    on a quantized model's first multi-token prompt. Run in a process of its own, so a crash fails this test (exit
    status -11) instead of taking pytest down with it."""
    import subprocess
    import sys

    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (`make install` builds it)")
    from genenv.models.registry import KNOWN_MODELS, ModelNotAvailable, packaged_file
    try:
        quantized = packaged_file(KNOWN_MODELS["smollm2"])   # the package's own GGUF: Q4_1 and Q8_0 tensors
    except ModelNotAvailable as err:
        print(f"skipped: {err}")
        pytest.skip(str(err))
    done = subprocess.run([sys.executable, "-c", CRASH_REPRODUCER, str(quantized)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert int(done.stdout.split("decoded")[-1]) > 10   # the prompt's tokens, in one batch

"""Issue 78, item 1: genenv on the architectures people train agents with (Llama 3, Qwen2, Qwen3, Gemma 3, Phi-3,
Mistral), each a small random-weight folder built offline with its family's tokenizer layout and chat template
(genenv.models.architectures): the GRPO log-probs packed and unshared, LoRA's targets, and whole runs through the
loop (warm start, rollouts, GRPO with a shared prefix, the pg and RWR updates, LoRA, gradient checkpointing, bf16
autocast, constrained decoding in that vocabulary, an exact resume, genenv eval)."""

import json
import re

import numpy as np
import pytest
import torch

from genenv.algos.grpo import PolicySample, grpo_step
from genenv.config import load_config
from genenv.io import read_jsonl
from genenv.metrics import TIMING_KEYS
from genenv.models.architectures import FAMILIES, random_folder
from genenv.models.packing import pack_groups
from genenv.models.policy import Policy

pytest.importorskip("peft", reason="peft is not installed (pip install peft==0.21.2)")

# the linear layers of each family's blocks, what LoRA's "all-linear" must adapt (lm_head left out)
LINEAR_LAYERS = {"llama": {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"},
                 "qwen2": {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"},
                 "qwen3": {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"},
                 "gemma3_text": {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"},
                 "phi3": {"qkv_proj", "o_proj", "gate_up_proj", "down_proj"},
                 "mistral": {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}}
# what the family's chat template puts before the assistant's answer
ASSISTANT_TURN = {"llama": "<|start_header_id|>assistant<|end_header_id|>\n\n", "qwen2": "<|im_start|>assistant\n",
                  "qwen3": "<|im_start|>assistant\n", "gemma3_text": "<start_of_turn>model\n",
                  "phi3": "<|assistant|>\n", "mistral": "[/INST]"}
SMOKE = ["threads=1", "progress=false"]
# a short warm start where a test checks that a path runs on the family, not what GRPO makes of its groups
SHORT_WARM_START = ["agent.warmstart.steps=20", "env.warmstart.steps=20"]


def _addition_texts() -> list[str]:
    """What the smoke preset's players read and write: the texts a family's tokenizer is trained on."""
    from genenv.domains import make_domain
    cfg = load_config("smoke")
    domain = make_domain(cfg.domain.name, **cfg.domain.options)
    tasks = domain.seed_tasks(np.random.default_rng(0), 200)
    return [f"{t.prompt}{t.answer}" for t in tasks] + [domain.simulator_prompt(t, {"success_rate": 0.5}) + t.text
                                                       for t in tasks]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    texts = _addition_texts()
    root = tmp_path_factory.mktemp("architectures")
    return {name: random_folder(name, root / name, texts, seed=0) for name in FAMILIES}


def test_every_family_is_a_folder_transformers_loads_with_its_chat_template(folders):
    for name, folder in folders.items():
        policy = Policy.load(folder)
        assert policy.use_chat_template and policy.model.config.model_type == name
        rendered = policy.tokenizer.apply_chat_template([{"role": "user", "content": "12+30= é"}], tokenize=False,
                                                        add_generation_prompt=True)
        assert rendered.endswith(ASSISTANT_TURN[name]) and "12+30= é" in rendered, name
        ids = policy.encode_prompt("12+30= é")
        assert policy.tokenizer.decode(ids) == rendered, name     # every text encodes, non-ASCII included
        assert policy.tokenizer.convert_ids_to_tokens(policy.eos_token_id) == FAMILIES[name].eos
    assert len({json.loads((f / "config.json").read_text())["architectures"][0] for f in folders.values()}) == 6


def _groups(rng, low: int, vocab: int):
    groups = []
    for _ in range(3):
        prompt = rng.integers(low, vocab, size=int(rng.integers(3, 9))).tolist()
        members = []
        for _ in range(4):
            turn = rng.integers(low, vocab, size=int(rng.integers(0, 4))).tolist()
            members.append((prompt + turn, rng.integers(low, vocab, size=int(rng.integers(1, 6))).tolist()))
        groups.append(members)
    return groups


@pytest.mark.parametrize("name", list(FAMILIES))
def test_packed_logprobs_and_gradients_equal_the_unshared(folders, name):
    """agent.shared_prefix: the same log-probs and gradients as the unshared batch, for every family's attention
    (grouped-query heads, Qwen3's and Gemma's norms on q and k, Gemma's sliding-window layers, Phi-3's fused qkv)."""
    policy = Policy.load(folders[name])
    policy.set_training(True)
    groups = _groups(np.random.default_rng(1), len(policy.tokenizer.all_special_ids) + 300, len(policy.tokenizer))
    flat = [sample for group in groups for sample in group]
    batch = policy.build_batch([p for p, _ in flat], [r for _, r in flat])
    unshared, _ = policy.token_logprobs(batch)
    packed = pack_groups(groups, policy.tokenizer.pad_token_id)
    shared, _ = policy.packed_token_logprobs(packed)
    mask = batch.response_mask
    assert packed.columns < batch.input_ids.numel()
    torch.testing.assert_close(shared * mask, unshared * mask, rtol=1e-5, atol=1e-5)
    params = [p for p in policy.model.parameters() if p.requires_grad]
    weights = torch.linspace(-1, 1, mask.numel()).reshape(mask.shape)
    for a, b in zip(torch.autograd.grad((unshared * mask * weights).sum(), params),
                    torch.autograd.grad((shared * mask * weights).sum(), params)):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)


def test_shared_prefix_is_refused_at_start_for_a_sliding_window_and_why(folders, tmp_path):
    """Gemma 3 reads some layers through a sliding window: packed, a token's column is not its distance to the
    prompt's start, so once sequences outgrow the window the log-probs differ (shown here with a 4-token window).
    The config refuses agent.shared_prefix for such a folder, naming the field; Mistral without a window runs."""
    from genenv.config import ConfigError, sliding_window_of
    gemma = json.loads((folders["gemma3_text"] / "config.json").read_text())
    assert sliding_window_of(gemma) == 512
    assert sliding_window_of(json.loads((folders["mistral"] / "config.json").read_text())) is None
    with pytest.raises(ConfigError, match=r"^agent.shared_prefix: gemma3_text attends through a sliding window of 512"):
        load_config("smoke", [f"agent.model={folders['gemma3_text']}", "agent.shared_prefix=true"])
    load_config("smoke", [f"agent.model={folders['gemma3_text']}"])
    load_config("smoke", [f"agent.model={folders['mistral']}", "agent.shared_prefix=true"])
    gemma["sliding_window"] = 4
    narrow = tmp_path / "narrow"
    narrow.mkdir()
    for item in folders["gemma3_text"].iterdir():
        (narrow / item.name).write_bytes(item.read_bytes())
    (narrow / "config.json").write_text(json.dumps(gemma))
    policy = Policy.load(narrow)
    groups = _groups(np.random.default_rng(1), len(policy.tokenizer.all_special_ids) + 300, len(policy.tokenizer))
    flat = [sample for group in groups for sample in group]
    batch = policy.build_batch([p for p, _ in flat], [r for _, r in flat])
    with torch.no_grad():
        unshared, _ = policy.token_logprobs(batch)
        shared, _ = policy.packed_token_logprobs(pack_groups(groups, policy.tokenizer.pad_token_id))
    assert float(((shared - unshared) * batch.response_mask).abs().max()) > 1e-3


@pytest.mark.parametrize("name", list(FAMILIES))
def test_lora_adapts_every_linear_layer_and_trains_under_checkpointing_and_bf16(folders, name):
    policy = Policy.load(folders[name])
    policy.apply_lora(rank=2, seed=0)
    adapted = {module_name.rsplit(".", 1)[-1] for module_name, module in policy.model.named_modules()
               if hasattr(module, "lora_A") and len(getattr(module, "lora_A"))}
    assert adapted == LINEAR_LAYERS[name]
    policy.set_gradient_checkpointing(True)
    policy.autocast_bf16 = True
    low = len(policy.tokenizer.all_special_ids) + 300
    groups = _groups(np.random.default_rng(2), low, len(policy.tokenizer))
    rng = np.random.default_rng(0)
    samples = [PolicySample(p, r, (rng.normal(size=len(r)) * 0.3 - 2.0).tolist(), float(a))
               for group in groups for (p, r), a in zip(group, rng.normal(size=4))]
    before = {k: v.detach().clone() for k, v in policy.model.named_parameters()}
    optimizer = torch.optim.AdamW([p for p in policy.model.parameters() if p.requires_grad], lr=1e-2)
    stats = grpo_step(policy, policy.base_view(), optimizer, samples, kl_coef=0.1, entropy_coef=0.0,
                      group_sizes=[4, 4, 4])
    assert np.isfinite(stats["loss"]) and stats["skipped"] == 0
    moved = {k for k, v in policy.model.named_parameters() if not v.detach().equal(before[k])}
    assert moved and all("lora_" in k for k in moved)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_the_simulators_pg_update_steps_on_every_family(folders, name):
    """env.update=pg on groups of one prompt's variations with their advantages: kept steps, the weights moved."""
    from genenv.algos.env_pg import pg_update
    policy = Policy.load(folders[name])
    policy.set_training(True)
    low = len(policy.tokenizer.all_special_ids) + 300
    groups = _groups(np.random.default_rng(3), low, len(policy.tokenizer))
    batch = policy.build_batch([p for g in groups for p, _ in g], [r for g in groups for _, r in g])
    with torch.no_grad():
        old, _ = policy.token_logprobs(batch)
    rows = iter(range(len(old)))
    advantages = (1.0, -1.0, 0.5, -0.5)
    samples = [[PolicySample(p, r, old[next(rows)][:len(r)].tolist(), a) for (p, r), a in zip(g, advantages)]
               for g in groups]
    before = [p.detach().clone() for p in policy.model.parameters()]
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=1e-3)
    stats = pg_update(policy, policy.frozen_copy(), optimizer, samples, steps=2, minibatch_groups=2, clip_eps=0.2,
                      kl_coef=0.05, max_kl=0.0, grad_clip=1.0, temperature=1.0, rng=np.random.default_rng(0))
    assert stats["steps"] == 2 and np.isfinite(stats["loss"])
    assert any(not a.equal(b) for a, b in zip(policy.model.parameters(), before))


@pytest.mark.parametrize("name", list(FAMILIES))
def test_llama_cpp_decodes_the_same_tokens_as_transformers_from_the_folders_own_gguf(folders, name):
    """Item 2: the GGUF written from the folder itself (its config, tokenizer and weights, no template) decodes on
    llama.cpp the same greedy tokens as transformers (f32), with log-probs within float rounding."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make install builds it)")
    from genenv.models.llamacpp import packaged_sampler
    from genenv.models.registry import llamacpp_refusal
    assert llamacpp_refusal(str(folders[name])) is None
    policy = Policy.load(folders[name])
    rng = np.random.default_rng(4)
    low = len(policy.tokenizer.all_special_ids) + 260
    prompts = [rng.integers(low, len(policy.tokenizer), size=int(rng.integers(3, 9))).tolist() for _ in range(3)]
    sampler = packaged_sampler(policy, str(folders[name]), threads=1, dtype="f32", context=256, parallel=4)
    uniforms = torch.rand(len(prompts), 10, generator=torch.Generator().manual_seed(0))
    try:
        greedy = sampler.sample(prompts, 1, 10, 0.0, None)
        sampled = sampler.sample(prompts, 1, 10, 1.0, uniforms)
    finally:
        sampler.close()
    for prompt, [(tokens, _)], [(drawn, logprobs)] in zip(prompts, greedy, sampled):
        with torch.no_grad():
            reference = policy.model.generate(torch.tensor([prompt]), max_new_tokens=10, do_sample=False,
                                              eos_token_id=None, pad_token_id=policy.tokenizer.pad_token_id)
            assert tokens and reference[0, len(prompt):len(prompt) + len(tokens)].tolist() == tokens, name
            trainer = policy.token_logprobs(policy.build_batch([prompt], [drawn]))[0][0][:len(drawn)]
        assert logprobs == pytest.approx(trainer.tolist(), abs=1e-3), name


@pytest.mark.slow
def test_the_trl_example_trains_every_family(folders, tmp_path, monkeypatch, capsys):
    """Item 1: docs/trl.md's example (TRL's GRPOTrainer on genenv's task stream and verifier) with each family's
    folder as both players: its rounds run and the simulator side logs them."""
    import runpy
    from pathlib import Path
    pytest.importorskip("trl", reason="trl is not installed (pip install 'genenv-coevolve[trl]')")
    example = Path(__file__).resolve().parent.parent / "examples" / "trl_genenv.py"
    for name, folder in folders.items():
        monkeypatch.setattr("sys.argv", [str(example), "--preset", "smoke", "--steps", "1", "--out",
                                         str(tmp_path / name), f"agent.model={folder}", f"env.model={folder}",
                                         *SMOKE, *SHORT_WARM_START])
        runpy.run_path(str(example), run_name="__main__")
        rounds = [line for line in capsys.readouterr().out.splitlines() if line.startswith("{'round': ")]
        assert rounds and rounds[0].startswith("{'round': 0, 'valid_fraction': "), name


def test_models_check_says_what_each_family_gets(folders, tmp_path, capsys):
    """Item 3: `genenv models check FOLDER`: the architecture, the parameters, the chat template, llama.cpp, the
    shared prefix (refused for Gemma 3's sliding window), LoRA's targets, a memory estimate for the preset; the first
    problem in plain words (exit status 1), a folder that is not one named."""
    from genenv.cli import main
    from genenv.model_check import check_model
    for name, folder in folders.items():
        report = check_model(folder, load_config("own-model", [f"agent.model={folder}", f"env.model={folder}",
                                                               "device=cpu"]))
        rows = dict(report.rows)
        assert rows["architecture"].startswith(name) and report.problem is None, (name, report.problems)
        assert int(rows["parameters"].split()[0].replace(",", "")) == sum(
            p.numel() for p in Policy.load(folder).model.parameters())
        assert repr(ASSISTANT_TURN[name])[1:-1] in rows["chat template"] and rows["llama.cpp"].startswith("yes"), name
        assert rows["shared prefix"].startswith("refused" if name == "gemma3_text" else "yes"), name
        assert set(rows["LoRA targets"].split(", ")) == LINEAR_LAYERS[name]
        assert re.fullmatch(r"about [0-9.]+ GB for this preset .* prompt tokens\), plus the process \(410 MB\)",
                            rows["memory"]), rows["memory"]
    assert main(["models", "check", str(folders["qwen3"]), "--preset", "smoke"]) == 0
    assert "llama.cpp      yes, a GGUF written from the folder" in capsys.readouterr().out
    broken = tmp_path / "broken"
    broken.mkdir()
    for item in folders["mistral"].iterdir():
        (broken / item.name).write_bytes(item.read_bytes())
    config = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**config, "vocab_size": 300}))
    assert main(["models", "check", str(broken)]) == 1
    assert "the embeddings 300 rows: a token past them cannot be embedded" in capsys.readouterr().out
    assert main(["models", "check", str(tmp_path / "nothing")]) == 1
    assert "not a Hugging Face model folder" in capsys.readouterr().out


def _stable(rows):
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FAMILIES))
def test_a_family_runs_the_loop_resumes_exactly_and_evaluates(folders, name, tmp_path):
    """Both players of the family: warm start, rollouts, GRPO on a shared prefix, the pg update under constrained
    decoding in the family's vocabulary; a run stopped after its first epochs resumes with the same metrics;
    genenv eval of the warm-started agent gives the run's own warm-start numbers; the paper's RWR with LoRA,
    gradient checkpointing and bf16 autocast runs too."""
    from genenv.cli import main
    from genenv.coevolve import run
    folder = str(folders[name])
    shared = [] if name == "gemma3_text" else ["agent.shared_prefix=true"]   # (refused: the test above)
    settings = [*SMOKE, f"agent.model={folder}", f"env.model={folder}", *shared,
                "env.constrained=true", "env.pg.minibatch_groups=2", "checkpoint_every_s=0"]
    whole = run(load_config("smoke", [*settings, "epochs=2"]), run_dir=tmp_path / "whole", log=lambda m: None)
    rows = read_jsonl(whole / "metrics.jsonl")
    assert sum(r["agent_updates"] for r in rows) > 0, name
    shape = re.compile(r"[0-9]{4}\+[0-9]{4}")          # the smoke domain's task shape (width 4)
    texts = [row["generated"] for epoch in range(2)
             for row in read_jsonl(whole / "samples" / f"epoch_{epoch}.jsonl")]
    assert texts and all(shape.fullmatch(text.strip()) for text in texts), name
    split = run(load_config("smoke", [*settings, "epochs=1"]), run_dir=tmp_path / "split", log=lambda m: None)
    resumed = run(load_config("smoke", [*settings, "epochs=2"]), run_dir=split, resume=True, log=lambda m: None)
    assert _stable(read_jsonl(resumed / "metrics.jsonl")) == _stable(rows)
    out = tmp_path / "eval"
    assert main(["eval", "--benchmark", "heldout", "--run", str(whole), "--model",
                 str(whole / "checkpoints" / "initial" / "agent"), "--out", str(out), "--threads", "1"]) == 0
    scores = json.loads((out / "scores.json").read_text())
    warm = json.loads((whole / "warmstart.json").read_text())
    assert {k: scores[k] for k in ("dev_by_level", "heldout_by_level")} == {k: warm[k] for k in ("dev_by_level",
                                                                                                 "heldout_by_level")}
    paper = [*SMOKE, f"agent.model={folder}", f"env.model={folder}", "env.update=rwr", "agent.lora_rank=2",
             "env.lora_rank=2", "gradient_checkpointing=true", "autocast=bfloat16", "epochs=2"]
    rwr = read_jsonl(run(load_config("smoke", paper), run_dir=tmp_path / "rwr", log=lambda m: None) / "metrics.jsonl")
    assert len(rwr) == 2 and sum(r["env_steps"] for r in rwr) > 0, name

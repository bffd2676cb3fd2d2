"""Issue 94, item 1: one preflight (genenv.preflight) asked by every entry point before anything is paid for. Each
test shows a refusal that used to come late (after both warm starts, or never) now coming first, every problem
on a line of its own naming its field, and no folder left behind."""

import json

import pytest

from genenv.cli import main
from genenv.config import ConfigError, load_config
from genenv.domains.addition import AdditionDomain
from genenv.models.architectures import random_folder

SMOKE = ["epochs=1", "progress=false"]
LLAMA_CPP_TINY = ("agent.sampler: llama.cpp cannot decode 'tiny': its tokenizer is a character one, not a BPE; or "
                  "set agent.sampler=transformers")
NO_SHAPE = ("env.constrained: domain 'addition' declares no task shape (Domain.task_shape); declare one "
            "(docs/domains.md) or set env.constrained=false")


@pytest.fixture
def shapeless(monkeypatch):
    """Addition as a domain that declares no task shape (a plugin's, a verifiers taskset)."""
    monkeypatch.setattr(AdditionDomain, "task_shape", lambda self: None)


@pytest.fixture
def no_warm_start(monkeypatch):
    """Every warm start fails the test: the preflight must refuse before one is paid for."""
    import genenv.compare
    import genenv.integrations.trl
    import genenv.run_folder

    def paid(*args, **kwargs):
        raise AssertionError("a warm start was paid before the preflight refused")
    for module in (genenv.run_folder, genenv.compare, genenv.integrations.trl):
        for name in ("warm_start_agent", "warm_start_simulator"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, paid)


@pytest.fixture(scope="module")
def narrow_folder(tmp_path_factory):
    """A random Llama folder with attention heads 16 wide: vLLM's CPU attention takes 32 or more."""
    texts = [f"{a}+{b}={a + b}" for a in range(40) for b in range(10)]
    return random_folder("llama", tmp_path_factory.mktemp("narrow") / "llama", texts, hidden_size=32, heads=2)


def test_a_run_lists_every_problem_before_its_folder_or_a_warm_start(tmp_path, capsys, shapeless, no_warm_start):
    """env.constrained on a shapeless domain was refused after both warm starts; llama.cpp on a model it cannot
    decode fell back to transformers: both now refused at once, with the device, before the run folder exists."""
    out = tmp_path / "run"
    code = main(["run", "--preset", "smoke", *SMOKE, "agent.sampler=llama.cpp", "env.constrained=true",
                 "device=cuda", "--out", str(out)])
    lines = capsys.readouterr().err.splitlines()
    assert code == 2
    assert lines[0].startswith("genenv: config error: device: 'cuda', and torch ")
    assert lines[1:] == [f"genenv: config error: {LLAMA_CPP_TINY}", f"genenv: config error: {NO_SHAPE}"]
    assert not out.exists()


def test_a_comparison_refuses_before_any_warm_start_naming_the_arm(tmp_path, shapeless, no_warm_start):
    """`genenv compare` checked neither the models nor the decoders and paid every seed's warm starts first."""
    from genenv.compare import compare
    out = tmp_path / "cmp"
    with pytest.raises(ConfigError) as refused:
        compare(out, preset="smoke", curricula="random", seeds="2", overrides=["agent.sampler=llama.cpp", *SMOKE],
                extra_arms=["shaped:env.constrained=true"], log=lambda message: None)
    assert str(refused.value).splitlines() == [LLAMA_CPP_TINY, f"{NO_SHAPE} (arm shaped)"]
    assert not out.exists()


def test_trls_side_refuses_before_the_simulators_warm_start(shapeless, no_warm_start):
    """TRL's side never asked about the decoders: a missing or unable one surfaced after the simulator's warm
    start. The agent's decoder is TRL's (not asked); the simulator's is."""
    pytest.importorskip("trl", reason="trl is not installed (the trl extra)")
    from genenv.integrations.trl import SimulatorSide
    cfg = load_config("smoke", ["env.sampler=llama.cpp", "agent.sampler=llama.cpp", "env.constrained=true",
                                "curriculum=static"])
    with pytest.raises(ConfigError) as refused:
        SimulatorSide(cfg)
    assert str(refused.value).splitlines() == [
        LLAMA_CPP_TINY.replace("agent.sampler", "env.sampler"), NO_SHAPE,
        "curriculum: 'static' trains on a fixed set; in TRL give that set to GRPOTrainer as its dataset (genenv "
        "export writes it), no simulator is needed"]


def test_eval_refuses_a_decoder_before_the_model_loads_and_heldout_honours_sampler(tmp_path, capsys,
                                                                                    narrow_folder):
    """`genenv eval --benchmark heldout --sampler vllm` ignored --sampler without a word (transformers decoded):
    it is now the preflight's refusal for a model vLLM cannot decode, and a decoder that can is the one used and
    recorded in scores.json."""
    out = tmp_path / "eval"
    code = main(["eval", "--benchmark", "heldout", "--model", str(narrow_folder), "--sampler", "vllm",
                 "--preset", "smoke", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "--sampler: vLLM cannot decode" in err and "head size is 16" in err
    assert not out.exists()
    code = main(["eval", "--benchmark", "heldout", "--model", "tiny", "--sampler", "llama.cpp", "--out", str(out)])
    assert code == 2 and not out.exists()
    assert main(["eval", "--benchmark", "heldout", "--model", str(narrow_folder), "--preset", "smoke",
                 "domain.heldout_per_level=2", "--out", str(out)]) == 0
    scores = json.loads((out / "scores.json").read_text())
    assert scores["sampler"] == "transformers" and scores["heldout_tasks"] > 0   # auto: the config's agent.sampler


def test_models_check_says_each_players_decoder_and_what_a_run_refuses(capsys, narrow_folder):
    """`models check FOLDER --preset smoke agent.sampler=vllm` said "vLLM on cpu no" then "problem none found",
    exit 0, where the run refused; now the run's refusal is a line and the exit status 1."""
    assert main(["models", "check", str(narrow_folder), "--preset", "smoke", "agent.sampler=vllm"]) == 1
    out = capsys.readouterr().out
    assert "decoder of the agent: vLLM on cpu (agent.sampler=vllm)" in out
    assert "decoder of the simulator: transformers on cpu (env.sampler=transformers)" in out
    assert f"run refuses  agent.sampler: vLLM cannot decode '{narrow_folder}'" in out
    assert main(["models", "check", str(narrow_folder), "--preset", "smoke"]) == 0
    assert main(["models", "check", str(narrow_folder)]) == 0   # own-model on this machine's device (a CPU here)
    assert "memory for --preset own-model device=cpu" in capsys.readouterr().out


def test_config_shows_the_config_and_says_what_a_run_refuses(capsys):
    assert main(["config", "--preset", "smoke", "agent.sampler=llama.cpp"]) == 0
    captured = capsys.readouterr()
    assert "sampler: llama.cpp" in captured.out
    assert captured.err.splitlines() == [f"genenv: a run refuses: {LLAMA_CPP_TINY}"]


@pytest.mark.parametrize("family", ["qwen3", "gemma3_text", "mistral"])
def test_models_random_writes_heads_vllms_cpu_build_takes(tmp_path, capsys, family):
    """These families set heads 16 wide in their configs: `genenv models random` wrote folders vLLM's CPU build
    refused where docs/models.md said it takes them."""
    from genenv.models.vllm_sampler import vllm_refusal
    out = tmp_path / family
    assert main(["models", "random", family, "--out", str(out), "--preset", "smoke"]) == 0
    assert json.loads((out / "config.json").read_text())["head_dim"] == 32
    assert vllm_refusal(str(out), "cpu", architecture=False) is None


def test_the_memory_estimate_counts_the_vllm_engines(narrow_folder):
    """`models check` left the vLLM engines out (5.7 GB for SmolLM2 with or without them; the run peaked at 10.0 GB
    on vLLM, 6.9 GB on transformers). On CPU an engine holds a copy of the weights and its KV cache: for this folder
    (2 layers, 1 KV head 16 wide, float32) 2 x 2 x 1 x 16 x 4 = 256 bytes a token, for 16,384 tokens."""
    from transformers import AutoConfig

    from genenv.model_check import memory_estimate
    config = AutoConfig.from_pretrained(narrow_folder)
    parameters = 100_000
    for settings, engines in (([], 0), (["agent.sampler=vllm"], 1), (["agent.sampler=vllm", "env.sampler=vllm"], 2)):
        estimate = memory_estimate(load_config("smoke", settings), parameters, config, 0, 10)
        assert estimate["vllm"] == pytest.approx(engines * (parameters * 4 + 256 * 16384) / 2**20)
        assert estimate["total"] >= estimate["process"] + estimate["agent"] + estimate["env"] + estimate["vllm"]
    assert memory_estimate(load_config("smoke", ["agent.sampler=vllm", "device=cuda"]), parameters, config, 0,
                           10)["vllm"] == 0   # (a GPU's engine lives in the GPU's memory)

"""Issue 40, item 3 (the weights' way to llama.cpp): a trained policy written as GGUF in its template's image reads
back, with transformers' GGUF reader, as the policy's own weights."""

import pytest
import torch


@pytest.fixture(scope="module")
def smollm2():
    from genenv.models.policy import Policy
    from genenv.models.registry import KNOWN_MODELS, ModelNotAvailable, packaged_file, resolve_model
    try:
        return Policy.load(resolve_model("smollm2")), packaged_file(KNOWN_MODELS["smollm2"])
    except ModelNotAvailable as err:
        print(f"skipped: {err}")
        pytest.skip(str(err))


def test_rotary_layout_by_hand():
    import numpy as np

    from genenv.models.gguf_export import to_rotary_layout
    # one head of 4 rows (dim 4): halves (0, 1 | 2, 3) become pairs (0, 2), (1, 3)
    weight = np.arange(8).reshape(4, 2)
    assert to_rotary_layout(weight, heads=1).tolist() == [[0, 1], [4, 5], [2, 3], [6, 7]]


@pytest.mark.slow
def test_a_trained_policy_reads_back_as_itself(smollm2, disposable_dir):
    """f32 read back by transformers' GGUF reader (an independent reading of the names and the rotary layout) is
    the policy's weights exactly; bf16 and q8_0, read by gguf's own reader, are that f32 file's tensors within
    their rounding (one transformers read: it costs about 27 s on SmolLM2)."""
    import numpy as np
    from gguf import GGUFReader
    from gguf.quants import dequantize
    from transformers import AutoModelForCausalLM

    from genenv.models.gguf_export import write_gguf
    tmp_path = disposable_dir
    policy, template = smollm2
    start = {k: v.clone() for k, v in policy.model.state_dict().items()}
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():   # "trained": every weight moved off the template's
        for param in policy.model.parameters():
            param.add_(0.01 * torch.randn(param.shape, generator=generator))
    try:
        info = write_gguf(policy, template, tmp_path / "trained.gguf", dtype="f32")
        assert info["tensors"] == 272 and not list(tmp_path.glob(".*tmp"))
        back = AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file="trained.gguf", dtype=torch.float32)
        ours, theirs = policy.model.state_dict(), back.state_dict()
        assert set(ours) == set(theirs)
        for name in ours:
            assert torch.equal(ours[name], theirs[name]), name
        assert not torch.equal(theirs["model.layers.0.self_attn.q_proj.weight"],
                               start["model.layers.0.self_attn.q_proj.weight"])
        exact = {t.name: dequantize(t.data, t.tensor_type) for t in GGUFReader(tmp_path / "trained.gguf").tensors}
        for dtype in ("bf16", "q8_0"):
            info = write_gguf(policy, template, tmp_path / f"{dtype}.gguf", dtype=dtype)
            assert info["tensors"] == 272
            rounded = {t.name: dequantize(t.data, t.tensor_type)
                       for t in GGUFReader(tmp_path / f"{dtype}.gguf").tensors}
            assert set(rounded) == set(exact)
            for name, values in exact.items():
                gap = float(np.abs(rounded[name].reshape(values.shape) - values).max())
                assert gap <= 1e-2 * max(1.0, float(np.abs(values).max())), (dtype, name)
            assert any(not np.array_equal(rounded[name].reshape(values.shape), values)
                       for name, values in exact.items())
    finally:
        policy.model.load_state_dict(start)


@pytest.mark.slow
def test_lora_adapters_are_merged_into_what_llama_cpp_gets(smollm2, disposable_dir):
    tmp_path = disposable_dir
    import copy

    from transformers import AutoModelForCausalLM

    from genenv.models.gguf_export import write_gguf
    from genenv.models.policy import Policy
    policy, template = smollm2
    adapted = Policy(copy.deepcopy(policy.model), policy.tokenizer)
    adapted.apply_lora(rank=2, seed=0)
    with torch.no_grad():
        for name, param in adapted.model.named_parameters():
            if "lora_B" in name:
                param.fill_(0.05)
    write_gguf(adapted, template, tmp_path / "adapted.gguf")
    merged = copy.deepcopy(adapted.model).merge_and_unload().state_dict()
    back = AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file="adapted.gguf", dtype=torch.float32)
    name = "model.layers.3.mlp.down_proj.weight"
    assert torch.equal(back.state_dict()[name], merged[name]) and not torch.equal(merged[name],
                                                                                  policy.model.state_dict()[name])
    assert hasattr(adapted.model, "peft_config")   # the trainer keeps its adapters

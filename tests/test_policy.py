import numpy as np
import torch

from genenv.models.policy import Policy


def test_generate_shapes_and_eos(tiny_policy):
    out = tiny_policy.generate(["12+3=", "4+5="], n=3, max_new_tokens=6, seed=1)
    assert len(out) == 2 and all(len(g) == 3 for g in out)
    for group in out:
        for gen in group:
            assert 1 <= len(gen.token_ids) <= 6
            assert len(gen.logprobs) == len(gen.token_ids)
            assert gen.finished == (gen.token_ids[-1] == tiny_policy.eos_token_id)


def test_sampling_logprobs_match_training_forward(tiny_policy):
    """The ratio pi/pi_old starts at 1: generate's log-probs equal a fresh teacher-forced forward."""
    out = tiny_policy.generate(["1+1=", "123+45=", "9="], n=2, max_new_tokens=8, seed=3)
    gens = [g for group in out for g in group]
    batch = tiny_policy.build_batch([g.prompt_ids for g in gens], [g.token_ids for g in gens])
    with torch.no_grad():
        logp, _ = tiny_policy.token_logprobs(batch)
    for row, gen in enumerate(gens):
        assert torch.allclose(logp[row, :len(gen.logprobs)], torch.tensor(gen.logprobs), atol=1e-4)


def test_same_seed_same_samples(tiny_policy):
    a = tiny_policy.generate(["1+2="], n=4, max_new_tokens=6, seed=7)
    b = tiny_policy.generate(["1+2="], n=4, max_new_tokens=6, seed=7)
    c = tiny_policy.generate(["1+2="], n=4, max_new_tokens=6, seed=8)
    assert [g.token_ids for g in a[0]] == [g.token_ids for g in b[0]]
    assert [g.token_ids for g in a[0]] != [g.token_ids for g in c[0]]


def test_batching_does_not_change_greedy_output(tiny_policy):
    prompts = ["1+2=", "333+4=", "56789+1="]
    whole = tiny_policy.generate(prompts, greedy=True, max_new_tokens=6)
    one_by_one = tiny_policy.generate(prompts, greedy=True, max_new_tokens=6, batch_size=1)
    assert [g[0].token_ids for g in whole] == [g[0].token_ids for g in one_by_one]


def test_save_load_roundtrip(tiny_policy, tmp_path):
    tiny_policy.save(tmp_path / "p")
    loaded = Policy.load(tmp_path / "p")
    for a, b in zip(tiny_policy.model.state_dict().values(), loaded.model.state_dict().values()):
        assert torch.equal(a, b)
    assert loaded.tokenizer("12+3").input_ids == tiny_policy.tokenizer("12+3").input_ids
    assert loaded.decode_many([loaded.encode_target("12+3")]) == ["12+3"]


def test_frozen_copy_is_independent(tiny_policy):
    ref = tiny_policy.frozen_copy()
    with torch.no_grad():
        next(tiny_policy.model.parameters()).add_(1.0)
    assert not torch.equal(next(ref.model.parameters()), next(tiny_policy.model.parameters()))
    assert all(not p.requires_grad for p in ref.model.parameters())


def test_sampling_uses_the_full_distribution(tiny_policy, monkeypatch):
    """No top-k / top-p truncation: GRPO's ratio needs samples from exactly the distribution it scores."""
    from transformers.generation import logits_process

    def forbidden(self, *args, **kwargs):
        raise AssertionError(f"{type(self).__name__} must not be applied")

    monkeypatch.setattr(logits_process.TopKLogitsWarper, "__call__", forbidden)
    monkeypatch.setattr(logits_process.TopPLogitsWarper, "__call__", forbidden)
    out = tiny_policy.generate(["1+2="], n=4, max_new_tokens=4, seed=0)
    assert len(out[0]) == 4


def test_prompt_encoding_matches_the_tokenizer(tiny_policy):
    texts = ["12+3=", "s5|1200+3400>", "12+3="]
    assert tiny_policy.encode_prompts(texts) == tiny_policy.tokenizer(texts).input_ids
    assert tiny_policy.encode_prompts(texts) == tiny_policy.tokenizer(texts).input_ids  # from the cache
    ids = tiny_policy.encode_prompts(["9="])[0]
    ids.append(999)  # callers may mutate what they get without corrupting the cache
    assert tiny_policy.encode_prompts(["9="])[0] == tiny_policy.tokenizer("9=").input_ids


def test_build_batch_layout(tiny_policy):
    batch = tiny_policy.build_batch([[1, 5, 6], [1, 7]], [[8, 2], [9, 10, 2]])
    pad = tiny_policy.tokenizer.pad_token_id
    assert batch.input_ids.tolist() == [[1, 5, 6, 8, 2, pad], [pad, 1, 7, 9, 10, 2]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 1, 0], [0, 1, 1, 1, 1, 1]]
    assert batch.position_ids.tolist() == [[0, 1, 2, 3, 4, 4], [0, 0, 1, 2, 3, 4]]
    assert batch.response_ids.tolist() == [[8, 2, pad], [9, 10, 2]]
    assert batch.response_mask.tolist() == [[1, 1, 0], [1, 1, 1]]
    assert batch.prompt_width == 3


def test_tiny_tokenizer_word_tokens_round_trip(tmp_path):
    """Listed words are one token (with or without a leading space) only as whole words; every other text over
    the alphabet stays one token per character and decodes exactly, also after save/load."""
    import string

    from genenv.models.tiny import build_tiny_tokenizer
    words = ["go", "to", "cab", "cabinet", "1", "pick_and_place_simple"]
    tokenizer = build_tiny_tokenizer(string.ascii_letters + string.digits + " _.,\n", words)

    def tokens(text):
        return tokenizer.convert_ids_to_tokens(tokenizer(text).input_ids)[1:]

    assert tokens("go to cabinet 1") == ["go", " to", " cabinet", " 1"]
    assert tokens("cab cabs") == ["cab", " ", "c", "a", "b", "s"]          # 'cabs' is not a listed word
    assert tokens("cabinet 10") == ["cabinet", " ", "1", "0"]
    assert tokens("pick_and_place_simple.") == ["pick_and_place_simple", "."]
    assert tokens("go_to") == ["g", "o", "_", "t", "o"]
    assert tokens("go\n\nto") == ["go", "\n", "\n", "to"]   # (a newline is a character like any other)
    for text in ["go to cabinet 1", "cabs, to go 10 cabinet", "  go  to_ cab", "a\n\n\nb\n"]:
        assert tokenizer.decode(tokenizer(text).input_ids, skip_special_tokens=True) == text
    tokenizer.save_pretrained(tmp_path)
    from transformers import AutoTokenizer
    text = "go to cabinet 1"
    assert AutoTokenizer.from_pretrained(tmp_path)(text).input_ids == tokenizer(text).input_ids


def test_tiny_tokenizer_without_words_is_the_char_tokenizer():
    """No words: exactly one token per character, newlines included."""
    from genenv.models.tiny import build_tiny_tokenizer
    tokenizer = build_tiny_tokenizer("0123456789+=|>s? \n")
    assert len(tokenizer) == 4 + 18
    text = "12+3\n\n= 15"
    assert tokenizer(text).input_ids == [tokenizer.bos_token_id] + [tokenizer.convert_tokens_to_ids(c) for c in text]


def test_tiny_tokenizer_refuses_words_outside_the_alphabet():
    import pytest

    from genenv.models.tiny import build_tiny_tokenizer
    with pytest.raises(ValueError, match="alphabet"):
        build_tiny_tokenizer("abc", ["abd"])
    with pytest.raises(ValueError, match="spaces"):
        build_tiny_tokenizer("ab ", ["a b"])


def test_loaded_weights_live_in_torch_memory(tiny_policy, tmp_path):
    """from_pretrained leaves weights in the memory-mapped file at unaligned offsets, where some CPUs' kernels
    round differently than for torch's own allocations: a loaded policy owns aligned, contiguous memory."""
    tiny_policy.save(tmp_path / "p")
    loaded = Policy.load(tmp_path / "p")
    for name, tensor in [*loaded.model.named_parameters(), *loaded.model.named_buffers()]:
        assert tensor.data_ptr() % 64 == 0 and tensor.is_contiguous(), name
    assert loaded.model.lm_head.weight is loaded.model.model.embed_tokens.weight  # still tied


def _with_generation_config(policy, folder, **settings):
    """Save ``policy`` as a checkpoint whose generation_config.json sets ``settings`` (as real ones do)."""
    from transformers import GenerationConfig
    policy.model.generation_config = GenerationConfig(**settings)
    policy.save(folder)
    (folder / "generation_config.json").write_text(GenerationConfig(**settings).to_json_string())
    return Policy.load(folder)


def test_checkpoint_generation_config_does_not_leak_into_sampling(tiny_policy, tmp_path):
    """Sampling is exactly softmax(logits / T) and greedy is argmax, whatever the checkpoint's
    generation_config says (Qwen2.5-Instruct ships repetition_penalty=1.05; others top_k, top_p, do_sample)."""
    prompt = tiny_policy.encode_prompt("12+3=")
    with torch.no_grad():
        first = tiny_policy.model(torch.tensor([prompt])).logits[0, -1]
    likeliest = int(first.argmax())
    policy = _with_generation_config(tiny_policy, tmp_path / "ckpt", do_sample=True, temperature=0.3, top_k=2,
                                     top_p=0.5, repetition_penalty=5.0, suppress_tokens=[likeliest])
    # greedy: the argmax path, computed by hand
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(8):
            ids.append(int(policy.model(torch.tensor([ids])).logits[0, -1].argmax()))
    expected = ids[len(prompt):]
    if policy.eos_token_id in expected:
        expected = expected[:expected.index(policy.eos_token_id) + 1]
    for seed in (0, 1):
        assert policy.generate([None], prompt_ids=[prompt], greedy=True, max_new_tokens=8, seed=seed)[0][0].token_ids \
            == expected
    # sampling at T = 1.5: the first token's frequencies over 4,000 draws against softmax(logits / 1.5)
    draws = policy.generate([None], prompt_ids=[prompt], n=4000, max_new_tokens=1, temperature=1.5, seed=0)[0]
    counts = torch.bincount(torch.tensor([g.token_ids[0] for g in draws]), minlength=first.numel()).double()
    probs = torch.softmax(first.double() / 1.5, dim=-1)
    sigma = (4000 * probs * (1 - probs)).sqrt()
    assert probs[likeliest] > 0.04 and counts[likeliest] > 0  # the suppressed token is drawn
    assert ((counts - 4000 * probs).abs() <= 5 * sigma + 3).all()


def _full_vocabulary_logprobs(policy, batch, temperature):
    """The textbook computation token_logprobs avoids: logits at every position, a full log-softmax."""
    logits = policy.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                          position_ids=batch.position_ids).logits.float()
    width, resp = batch.prompt_width, batch.response_ids.shape[1]
    logp_all = torch.log_softmax(logits[:, width - 1:width - 1 + resp] / temperature, dim=-1)
    return logp_all.gather(-1, batch.response_ids.unsqueeze(-1)).squeeze(-1), -(logp_all.exp() * logp_all).sum(-1)


def test_response_only_logprobs_and_entropy_equal_the_full_log_softmax(tiny_policy):
    """Log-probs from the response positions' logits minus their log-sum-exp, and the entropy computed block by
    block without gradients, equal a full log-softmax over every position, at temperature 1 and 0.7."""
    batch = tiny_policy.build_batch([[1, 5, 6, 7], [1, 7], [1, 9, 9]], [[8, 2], [9, 10, 11, 2], [4]])
    for temperature in (1.0, 0.7):
        with torch.no_grad():
            want_logp, want_entropy = _full_vocabulary_logprobs(tiny_policy, batch, temperature)
            logp, entropy = tiny_policy.token_logprobs(batch, temperature=temperature, with_entropy=True)
        mask = batch.response_mask.bool()
        assert torch.allclose(logp[mask], want_logp[mask], atol=1e-5)
        assert torch.allclose(entropy[mask], want_entropy[mask], atol=1e-5)
        assert (entropy[mask] > 0).all()


def test_entropy_carries_gradients_only_when_asked(tiny_policy):
    batch = tiny_policy.build_batch([[1, 5, 6]], [[8, 2]])
    _, detached = tiny_policy.token_logprobs(batch, with_entropy=True)
    logp, with_grad = tiny_policy.token_logprobs(batch, with_entropy=True, entropy_grad=True)
    assert not detached.requires_grad and with_grad.requires_grad and logp.requires_grad
    assert torch.allclose(detached, with_grad.detach(), atol=1e-6)


def test_prompt_cache_stays_within_its_byte_budget(tiny_policy, monkeypatch):
    """Multi-turn contexts rarely repeat: the cache starts afresh when full, and what it returns never changes."""
    from genenv.models import policy as policy_module
    monkeypatch.setattr(policy_module, "PROMPT_CACHE_BYTES", 1000)
    texts = [f"{i}+{i * 7}=" for i in range(200)]
    for start in range(0, 200, 10):
        chunk = texts[start:start + 10]
        assert tiny_policy.encode_prompts(chunk) == tiny_policy.tokenizer(chunk).input_ids
        assert tiny_policy._prompt_cache_bytes <= 1000
        assert len(tiny_policy._prompt_cache) <= 30
    assert tiny_policy.encode_prompts(texts[-3:]) == tiny_policy.tokenizer(texts[-3:]).input_ids


def test_gradient_checkpointing_gives_the_same_gradients(tiny_policy):
    """Recomputing activations in the backward pass changes the memory, never the numbers (bit for bit: the
    same forward kernels run again on the same inputs)."""
    batch = tiny_policy.build_batch([[1, 5, 6, 7], [1, 7]], [[8, 2], [9, 10, 2]])
    grads = []
    for enabled in (False, True):
        tiny_policy.set_gradient_checkpointing(enabled)
        assert tiny_policy.checkpointing == enabled
        tiny_policy.model.train()
        tiny_policy.model.zero_grad(set_to_none=True)
        logp, _ = tiny_policy.token_logprobs(batch)
        (-(logp * batch.response_mask).sum()).backward()
        grads.append([p.grad.clone() for p in tiny_policy.model.parameters()])
    assert all(a.equal(b) for a, b in zip(*grads))


def test_a_batch_split_in_two_samples_the_same_tokens_as_the_whole(tiny_policy):
    """Each sequence draws from uniforms keyed by (seed, its key): a shard of a batch, in another order, samples
    what the whole did. (In float64 so that the model's own arithmetic, whose rounding may depend on the batch
    shape, cannot move a token: a flip would need a uniform within ~1e-16 of a cumulative-probability edge.)"""
    from genenv.seeding import sequence_key
    tiny_policy.model.double()
    prompts = ["12+3=", "4+5=", "777+1=", "9+99=", "0+0="]
    keys = [sequence_key(i, j) for i in range(5) for j in range(3)]
    whole = tiny_policy.generate(prompts, n=3, max_new_tokens=8, seed=4, keys=keys)
    back = tiny_policy.generate(prompts[3:], n=3, max_new_tokens=8, seed=4, keys=keys[9:])
    front = tiny_policy.generate(prompts[:3][::-1], n=3, max_new_tokens=8, seed=4,
                                 keys=[k for i in (2, 1, 0) for k in keys[3 * i:3 * i + 3]], batch_size=4)
    split = front[::-1] + back
    assert [[g.token_ids for g in group] for group in split] == [[g.token_ids for g in group] for group in whole]
    for group_a, group_b in zip(split, whole):
        for a, b in zip(group_a, group_b):
            assert np.allclose(a.logprobs, b.logprobs, rtol=0, atol=1e-9)
    other = tiny_policy.generate(prompts, n=3, max_new_tokens=8, seed=5, keys=keys)
    assert [g.token_ids for group in other for g in group] != [g.token_ids for group in whole for g in group]


def test_generate_wants_one_key_per_sequence(tiny_policy):
    import pytest
    with pytest.raises(ValueError, match="one key per sequence"):
        tiny_policy.generate(["1+2="], n=2, keys=[1])


def test_switching_mode_sets_every_modules_flag(tiny_policy):
    for training in (True, False, True):
        tiny_policy.set_training(training)
        assert all(module.training == training for module in tiny_policy.model.modules())


def test_a_module_with_its_own_train_is_switched_through_it():
    """A module overriding ``train`` (doing more than set flags) makes the switch go through ``nn.Module.train``,
    so the override runs."""
    from genenv.config import TinyModelConfig
    from genenv.models.tiny import build_tiny_policy

    class Counting(torch.nn.Module):
        calls = []

        def train(self, mode=True):
            Counting.calls.append(mode)
            return super().train(mode)

    policy = build_tiny_policy(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2,
                                               max_positions=48), "0123456789+= ", seed=0)
    policy.model.model.extra = Counting()
    start = policy.model.training
    policy.set_training(not start)
    policy.set_training(start)
    assert Counting.calls == [not start, start]
    assert all(module.training == start for module in policy.model.modules())


def test_a_lora_model_switches_its_adapters_too(tiny_policy):
    tiny_policy.set_training(True)   # the flag list of the plain model is built now
    tiny_policy.apply_lora(rank=2)   # a new model object: its own list
    tiny_policy.set_training(False)
    tiny_policy.set_training(True)
    assert all(module.training for module in tiny_policy.model.modules())
    assert any("lora" in name for name, _ in tiny_policy.model.named_modules())


def test_char_level_prompts_get_the_librarys_ids(tiny_policy):
    """The dict-lookup encoding of the tiny char tokenizer (CharLevelEncoder) gives the tokenizers library's ids on
    random text: known and unknown characters, whitespace and newlines, non-ASCII, added tokens' texts."""
    from genenv.models.char_level import CharLevelEncoder
    backend = tiny_policy.tokenizer.backend_tokenizer
    encoder = CharLevelEncoder.of(backend)
    assert encoder is not None and encoder.prefix == [tiny_policy.tokenizer.bos_token_id]
    rng = np.random.default_rng(0)
    pieces = list("0123456789+=|>s? ") + ["\n", "\t", "\r\n", "x", "é", "😀", "[", "]", "[EOS]", "[PAD]", "[BO"]
    texts = ["", " ", "\n\n"] + ["".join(rng.choice(pieces, size=int(rng.integers(1, 40)))) for _ in range(500)]
    for text in texts:
        assert tiny_policy.encode_prompts([text])[0] == backend.encode(text).ids, text
    assert encoder.encode("1+[EOS]") is None   # an added token's text: the library's own split decides


def test_other_tokenizers_are_not_taken_for_char_level():
    from genenv.models.char_level import CharLevelEncoder
    from genenv.models.tiny import build_tiny_tokenizer
    words = build_tiny_tokenizer("abcdefghijklmnopqrstuvwxyz 0123456789", words=["apple", "box"])
    assert CharLevelEncoder.of(words.backend_tokenizer) is None   # its split keeps whole words
    from tokenizers import Tokenizer, models, pre_tokenizers
    bpe = Tokenizer(models.BPE({"a": 0, "b": 1, "ab": 2, "[UNK]": 3}, [("a", "b")], unk_token="[UNK]"))
    bpe.pre_tokenizer = pre_tokenizers.Whitespace()
    assert CharLevelEncoder.of(bpe) is None


def _cut_where_stop_says(tokens, stop, eos=None):
    """The tokens a sequence keeps when ``stop`` is asked after each of them but EOS: up to the first that it says
    True for."""
    for length in range(1, len(tokens) + 1):
        if tokens[length - 1] != eos and stop(tokens[:length]):
            return tokens[:length]
    return tokens


def test_a_stop_ends_each_sequence_where_it_says_and_changes_nothing_before(tiny_policy):
    """generate(stop=...): every sequence is the one drawn without it, cut at the first token ``stop`` says True for
    (unfinished, its log-probs cut with it); the others go on as before. Greedy and keyed draws, in batches of four
    whose rows stop at different steps."""
    prompts = ["s1|12+34>", "s5|1+2>", "s9|123+456>"]

    def stop(tokens):   # after 2-5 tokens, how many set by the first
        return len(tokens) >= 2 + tokens[0] % 4

    for options in ({"greedy": True}, {"n": 3, "seed": 11}):
        whole = tiny_policy.generate(prompts, max_new_tokens=12, batch_size=4, **options)
        stopped = tiny_policy.generate(prompts, max_new_tokens=12, batch_size=4, stop=stop, **options)
        cut_somewhere = 0
        for whole_group, stopped_group in zip(whole, stopped):
            for full, short in zip(whole_group, stopped_group):
                expected = _cut_where_stop_says(full.token_ids, stop, tiny_policy.eos_token_id)
                assert short.token_ids == expected
                cut_somewhere += len(expected) < len(full.token_ids)
                if len(expected) < len(full.token_ids):
                    assert not short.finished
                    assert short.text == tiny_policy.decode_many([expected])[0]
                else:
                    assert short.finished == full.finished and short.text == full.text
                if full.logprobs:
                    assert short.logprobs == full.logprobs[:len(expected)]
        assert cut_somewhere >= 2


def test_stop_after_line_cuts_after_the_first_finished_line_it_accepts():
    """StopAfterLine asks its line test only at a token holding a newline, with every finished line so far, and a
    response stops right after the first line that passes; tokens of several characters (one holding '\\n' in
    its middle) count as one."""
    from genenv.eval_driver import StopAfterLine

    vocabulary = ["a", "b", "X", "\n", "b\nX", " "]

    class Words:   # a tokenizer over ``vocabulary`` and a policy's decode_many
        tokenizer = vocabulary

        @staticmethod
        def decode_many(sequences):
            return ["".join(vocabulary[t] for t in ids) for ids in sequences]

    stop = StopAfterLine(Words(), lambda lines: "X" in lines.split("\n")[-1])
    assert stop.newline_tokens == {3, 4}
    a, b, x, newline, b_newline_x, space = range(6)
    response = [a, x, b, newline, b, newline, x]
    assert _cut_where_stop_says(response, stop) == [a, x, b, newline]
    assert stop.asked == 1
    assert _cut_where_stop_says([a, b_newline_x, space, newline, a], stop) == [a, b_newline_x, space, newline]
    assert _cut_where_stop_says([x, a, b], stop) == [x, a, b]       # no finished line: never asked
    assert _cut_where_stop_says([a, newline, b, newline], stop) == [a, newline, b, newline]   # none passes

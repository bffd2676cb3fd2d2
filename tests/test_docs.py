"""Every command the README and docs/ show is exercised: parsed by the CLI's own parser with its config
resolved (a renamed flag, preset or knob fails here), the cheap ones run, and the code examples run."""

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from genenv.cli import main, parse_command_line
from genenv.config import load_config

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "benchmarks" / "README.md"]
RUN_FOR_REAL = {("domains",), ("config", "--describe"), ("config", "--presets")}


PROGRAMS = "genenv|make|python|torchrun|accelerate"   # the project's own commands and its launchers


def _commands(path: Path) -> list[str]:
    """Shell commands in fenced bash blocks and inline code spans that start with genenv, make, python, torchrun or
    accelerate (wherever they are written from)."""
    text = path.read_text()
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        found += [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    found += re.findall(rf"`((?:PYTHONPATH=\S+ )?(?:\S*/)?(?:{PROGRAMS}) [^`]*)`", text)
    return [c for c in found if re.match(rf"(PYTHONPATH=\S+ )?(\S*/)?({PROGRAMS}) ", c)]


def _all_commands():
    return [(path.relative_to(ROOT).as_posix(), command) for path in DOCS for command in _commands(path)]


def test_docs_show_commands_and_the_readme_stays_short():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 8 * 1024
    lines = readme.splitlines()  # the two set-up commands open it
    assert lines[2] == "```bash" and lines[3].startswith("make run ") and lines[4].startswith("make test ")
    assert len(_all_commands()) >= 30


def _retired_scripts() -> dict[str, str]:
    """benchmarks/README.md's retired one-offs: script path -> the commit that runs it."""
    text = (ROOT / "benchmarks" / "README.md").read_text()
    rows = re.findall(r"^\| `([a-z_]+\.py)` \|.*\| ([0-9a-f]{7,40}) \|$", text, re.M)
    return {f"benchmarks/{name}": commit for name, commit in rows}


def _linked_pages(path: Path) -> set[Path]:
    """The markdown pages of this repository a page links to (relative links; anchors and web links left out)."""
    out = set()
    for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
        target = target.split("#")[0]
        if not target or "://" in target:
            continue
        resolved = (path.parent / target).resolve()
        if resolved.is_file() and resolved.suffix == ".md":
            out.add(resolved)
    return out


def test_every_page_is_reachable_from_the_readme():
    """Issue 76, item 6: a reader who starts at the README can reach every page of docs/ (and benchmarks/README.md)
    by following links."""
    seen, todo = set(), [(ROOT / "README.md").resolve()]
    while todo:
        page = todo.pop()
        if page in seen:
            continue
        seen.add(page)
        todo.extend(_linked_pages(page) - seen)
    pages = {p.resolve() for p in (ROOT / "docs").rglob("*.md")} | {(ROOT / "benchmarks" / "README.md").resolve()}
    assert sorted(str(p.relative_to(ROOT)) for p in pages - seen) == []


def test_every_documented_command_is_written_from_the_projects_venv():
    """A command the docs show runs as written from a clone after `make install`: genenv, python and the launchers
    as .venv/bin/... (a bare `torchrun` was "command not found" outside an activated venv), make as make."""
    bare = [(where, command) for where, command in _all_commands()
            if not re.match(r"(PYTHONPATH=\S+ )?(make |\.venv/bin/)", command)]
    assert bare == []


@pytest.mark.parametrize("where,command", _all_commands())
def test_every_documented_command_is_valid(where, command, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    words = shlex.split(command)
    if words[0].startswith("PYTHONPATH="):
        words = words[1:]
    program, args = Path(words[0]).name, words[1:]
    if program in ("torchrun", "accelerate"):   # a launcher: the script it starts is there
        scripts = [word for word in args if word.endswith(".py")]
        assert scripts and (ROOT / scripts[0]).exists(), f"{where}: {command}"
        return
    if program == "make":
        targets = set(re.findall(r"^([a-z-]+):", (ROOT / "Makefile").read_text(), re.M))
        assert args[0] in targets, f"{where}: make {args[0]} is not a target"
        return
    if program == "python":
        if args[0] == "-c":  # inline code: it must at least parse
            compile(args[1], where, "exec")
            return
        if args[0] == "-m":  # a module: it must be importable here
            assert importlib.util.find_spec(args[1]) is not None, f"{where}: no module {args[1]}"
            return
        script = ROOT / args[0]
        retired = _retired_scripts()
        if not script.exists() and args[0] in retired:   # a one-off retired with the commit that runs it
            commit = retired[args[0]]
            known = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"],
                                   capture_output=True).returncode == 0
            if known:   # (a clone without that history has only benchmarks/README.md's word for it)
                held = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}:{args[0]}"],
                                      capture_output=True)
                assert held.returncode == 0, f"{where}: {args[0]} is not at commit {commit}"
            return
        assert script.exists(), f"{where}: {args[0]} does not exist"
        return
    parsed = parse_command_line(args)
    if tuple(args) in RUN_FOR_REAL:
        assert main(args) == 0
    elif parsed.command in ("run", "compare") and not getattr(parsed, "resume", None):
        load_config(parsed.preset, [o for o in parsed.overrides if "=" in o], parsed.config)
    elif parsed.command == "config":
        load_config(parsed.preset, parsed.overrides)


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


@pytest.mark.slow
def test_the_domain_page_example_trains(tmp_path):
    """docs/domains.md's one-page domain, saved as a module of its own, runs through the CLI."""
    (tmp_path / "readme_domain.py").write_text(_python_blocks(ROOT / "docs" / "domains.md")[0])
    result = subprocess.run([sys.executable, "-m", "genenv.cli", "run", "--preset", "smoke", "--out",
                             str(tmp_path / "run"), "domain.name=readme_domain:SortingDomain", "epochs=1",
                             "threads=1", "domain.num_seed_tasks=100"], capture_output=True, text=True,
                            env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "run" / "metrics.jsonl").read_text().count("\n") == 1


def test_method_doc_curriculum_example_is_one_class(tmp_path, monkeypatch):
    """docs/curricula.md's new curriculum: one class, registered, runs through the loop with the same budget."""
    from genenv.coevolve import rollout_budget, run
    from genenv.curricula import curriculum_names
    from genenv.io import read_jsonl
    (tmp_path / "unsolved_curriculum.py").write_text(_python_blocks(ROOT / "docs" / "curricula.md")[0])
    monkeypatch.syspath_prepend(str(tmp_path))
    __import__("unsolved_curriculum")
    assert "unsolved" in curriculum_names()
    cfg = load_config("smoke", ["threads=1", "curriculum=unsolved", "epochs=1"])
    out = run(cfg, run_dir=tmp_path / "run", log=lambda m: None)
    row = read_jsonl(out / "metrics.jsonl")[0]
    fresh, replay = rollout_budget(cfg)
    assert row["curriculum"] == "unsolved" and row["generated"] == 0
    assert row["rollouts_this_epoch"] == (fresh + replay) * cfg.agent.group_size


def test_domains_doc_example_is_a_complete_domain_that_passes_check_domain(tmp_path):
    """docs/domains.md's one-page domain, saved as a module on its own, holds every property (issue 39: a reader
    must be able to write a domain from that page alone)."""
    (tmp_path / "page_domain.py").write_text(_python_blocks(ROOT / "docs" / "domains.md")[0])
    result = subprocess.run([sys.executable, "-m", "genenv.cli", "check-domain", "page_domain:SortingDomain"],
                            capture_output=True, text=True, env={**__import__("os").environ,
                                                                 "PYTHONPATH": str(tmp_path)}, timeout=300)
    assert result.returncode == 0 and "every property holds" in result.stdout, result.stdout + result.stderr


def test_the_methods_phases_are_listed_in_the_loops_order():
    """docs/method.md's numbered phases follow run_epoch's timed phases in the order the loop runs them (issue 76:
    the simulator update was listed before the pools while the loop grows the pools first)."""
    import inspect

    from genenv import coevolve
    timed = re.findall(r'timer\("([a-z_]+)"\)', inspect.getsource(coevolve.run_epoch))
    loop = [p for p in timed if p != "checkpoint_wait"]
    text = (ROOT / "docs" / "method.md").read_text()
    listed = re.findall(r"^\d\. \*\*([a-z ]+)\*\*", text, re.M)
    names = {"agent update": "agent_update", "simulator update": "env_update"}
    assert [names.get(p, p) for p in listed] == loop


def test_every_user_guide_page_is_under_12_kB():
    """Issue 76, item 6: the user guide (README, docs/*.md, benchmark pages) stays readable in one sitting; the lab
    notebook (docs/results-log/) is exempt."""
    guide = [ROOT / "README.md", *(p for p in (ROOT / "docs").rglob("*.md") if "results-log" not in p.parts)]
    sizes = {str(p.relative_to(ROOT)): len(p.read_bytes()) for p in guide}
    assert {page: size for page, size in sizes.items() if size >= 12_000} == {}

"""The house keeps its shape (issue 56): one benchmark, one folder; no import loop among genenv's modules, at file or
folder scale; no upward import out of a domain package. Read from the source's own import statements (every one,
those inside functions too; ``if TYPE_CHECKING:`` blocks, which never run, left out)."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
DOMAINS = SRC / "genenv" / "domains"


def _modules() -> dict[str, Path]:
    out = {}
    for path in (SRC / "genenv").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _type_checking_only(tree: ast.AST) -> set[int]:
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            skipped |= {id(child) for statement in node.body for child in ast.walk(statement)}
    return skipped


def imports_of(name: str) -> set[str]:
    """The genenv modules ``name`` imports (``from genenv.x import y`` names module genenv.x.y where there is one)."""
    tree = ast.parse(MODULES[name].read_text())
    skipped, found = _type_checking_only(tree), set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
    return {module for module in found if module in MODULES and module != name}


GRAPH = {name: imports_of(name) for name in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(graph):
        if node not in index:
            visit(node)
    return found


def folder_of(module: str) -> str:
    """A module's folder: the subpackage folder it lives in (genenv.models, genenv.domains.travel, ...), or the
    module itself for a file directly in genenv/ or genenv/domains/."""
    path = MODULES[module]
    folder = path.parent
    if folder in (SRC / "genenv", DOMAINS) and path.name != "__init__.py":
        return module
    return ".".join(folder.relative_to(SRC).parts)


def test_no_import_loop_at_file_or_folder_scale():
    assert cycles(GRAPH) == []
    folders: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        for target in targets:
            if folder_of(module) != folder_of(target):
                folders.setdefault(folder_of(module), set()).add(folder_of(target))
    assert cycles(folders) == []


def _below(module: str) -> set[str]:
    seen, todo = set(), [module]
    while todo:
        for nxt in GRAPH[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_a_domain_package_imports_nothing_above_it():
    """A domain package imports its own modules, the protocol (genenv.domains.base and its helpers) and modules that
    never import a domain: nothing that sits above the domains (the loop, the evaluation, the CLI)."""
    packages = [p for p in DOMAINS.iterdir() if (p / "__init__.py").exists()]
    assert {p.name for p in packages} >= {"apibank", "travel", "household", "multihop", "toolcall", "reasoning_gym"}
    upward = []
    for package in packages:
        prefix = f"genenv.domains.{package.name}"
        for module, targets in GRAPH.items():
            if module != prefix and not module.startswith(prefix + "."):
                continue
            for target in targets:
                inside = target == prefix or target.startswith(prefix + ".")
                domain_free = not any(t == "genenv.domains" or t.startswith("genenv.domains.") and
                                      t.split(".")[2] not in ("base", "jsontask") for t in _below(target) | {target})
                if not inside and not domain_free:
                    upward.append(f"{module} imports {target}")
    assert upward == []


def test_each_benchmark_lives_in_its_domains_folder_and_genenv_eval_finds_it_there():
    from genenv.domains import benchmark_module, benchmark_names
    names = benchmark_names()
    assert set(names) == {"api-bank", "travelplanner", "alfworld", "bamboogle", "bfcl"}
    for name, package in names.items():
        module = benchmark_module(name)
        assert module.__name__.startswith(package + ".") and callable(module.from_command_line)
    assert benchmark_module("nope") is None
    assert all(callable(benchmark_module(name).add_arguments) for name in [*names, "heldout"])
    assert not (SRC / "genenv" / "evaluators").exists()
    cli = (SRC / "genenv" / "cli.py").read_text()
    assert "eval_apibank" not in cli and "eval_bfcl" not in cli   # no table of drivers in the CLI


def test_the_map_of_the_code_in_the_docs_names_every_module_and_folder_and_nothing_else():
    """docs/method.md's "Where things are" cannot go stale: every module and folder of genenv (and every domain
    package) is named there, and every path it names exists."""
    text = (SRC.parent / "docs" / "method.md").read_text()
    block = text[text.index("## Where things are"):]
    block = block[block.index("```") + 3:]
    block = block[:block.index("```")]
    named = {line.split()[0].rstrip("/") for line in block.splitlines() if line.startswith("src/")}
    root = SRC / "genenv"
    expected = {f"src/genenv/{p.name}" for p in root.iterdir()
                if (p.suffix == ".py" and p.name != "__init__.py") or (p.is_dir() and (p / "__init__.py").exists())}
    expected |= {f"src/genenv/domains/{p.name}" for p in DOMAINS.iterdir() if (p / "__init__.py").exists()}
    assert expected - named == set(), "modules missing from docs/method.md's map"
    assert {path for path in named if not (SRC.parent / path).exists()} == set(), "paths that do not exist"

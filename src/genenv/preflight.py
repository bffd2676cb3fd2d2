"""One preflight for every entry point: every problem a config has, one line each naming its field, found before
anything is trained, downloaded or written.

``genenv run``, ``genenv compare`` (for every arm, before any warm start), TRL's side
(:class:`genenv.integrations.trl.SimulatorSide`), ``genenv eval``, ``genenv models check --preset`` and
``genenv config`` all ask it. What it looks at, in order:

- the device torch here can use (``device``);
- each player's model (``agent.model``, ``env.model``): a packaged name whose package is there, a model folder
  genenv can load (:func:`genenv.model_check.model_problem`);
- each player's decoder (``agent.sampler``, ``env.sampler``): installed, and able to decode that model on that
  device, as the model's ``config.json`` says (:func:`sampler_problem`: one rule everywhere, a refusal naming the
  decoder and why);
- the curriculum and the strategies the config selects (their names, the plugins' checks of their knobs);
- what the curriculum and the settings need of the domain (:func:`domain_problems`: a written task it can
  ground, ordered levels for a level gate, a task shape for ``env.constrained``, a simulator that can be trained);
- with ``trl=True``, what TRL's side needs besides (:func:`trl_problems`).
"""

from __future__ import annotations

from dataclasses import dataclass

from transformers import AutoTokenizer

from genenv.config import ConfigError, RunConfig
from genenv.curricula import Curriculum, make_curriculum
from genenv.domains import Domain, domain_class, make_domain
from genenv.model_check import TOOL_CALL_ADVICE, device_problem, model_problem, tool_call_problem
from genenv.models.registry import resolve_model
from genenv.models.samplers import sampler_problem
from genenv.signals import GATES, check_config, part


def player_problems(cfg: RunConfig, decoded: tuple[str, ...] = ("agent", "env")) -> list[str]:
    """The device, then each player's model, and the decoder of each player genenv decodes (``decoded``; TRL's
    trainer decodes the agent itself). A frozen endpoint's simulator is the endpoint's: nothing local to check. A
    folder both players share is checked once, named by the first field."""
    problems = [device_problem(cfg.device)]
    model_lines: dict[str, str | None] = {}   # each folder's problem, asked once
    for name in ("agent", "env"):
        player = cfg.agent if name == "agent" else cfg.env
        if name == "env" and cfg.env.backend != "local":
            continue
        if player.model not in model_lines:
            model_lines[player.model] = model_problem(f"{name}.model", player.model)
            problems.append(model_lines[player.model])
        if model_lines[player.model] is None and name in decoded:   # (a model that cannot load: no decoder asked)
            problems.append(sampler_problem(f"{name}.sampler", player.sampler, player.model, cfg.device))
    return [problem for problem in problems if problem]


def domain_problems(cfg: RunConfig, curriculum: Curriculum, domain: Domain) -> list[str]:
    """What the settings need of ``domain`` and it does not declare, or a curriculum that would train a simulator
    that cannot be trained (a remote endpoint)."""
    problems = []
    try:
        curriculum.check(domain)
    except ConfigError as error:
        problems.append(str(error))
    if curriculum.trains_simulator and cfg.env.backend == "openai":
        problems.append(f"env.backend: 'openai' is a frozen simulator (the endpoint's model is never trained), and "
                        f"curriculum {cfg.curriculum!r} trains it; use curriculum=random (the authors' setup), "
                        "static or learnability with it")
    if cfg.env.backend == "openai" and not cfg.env.openai.model:
        problems.append("env.openai.model: name the model the endpoint serves (env.backend=openai)")
    if curriculum.generates and not domain.grounds_simulator_text:
        problems.append(f"curriculum: {cfg.curriculum!r} has a simulator write tasks, and {domain.name!r} cannot "
                        "ground a written task (Domain.grounds_simulator_text: a verifiers taskset scores replies, "
                        "it cannot say whether a new task is sound); use curriculum=static or learnability")
    if curriculum.trains_simulator and GATES.selected(cfg).needs_ordered_levels and not domain.ordered_levels:
        problems.append(f"env.pg.gate: {cfg.env.pg.gate!r} reads the domain's difficulty levels, and "
                        f"{domain.name!r} does not declare them ordered (Domain.ordered_levels); use env.pg.gate=none")
    if cfg.env.constrained and cfg.env.backend == "local" and domain.task_shape() is None:
        problems.append(f"env.constrained: domain {domain.name!r} declares no task shape (Domain.task_shape); "
                        "declare one (docs/domains.md) or set env.constrained=false")
    return problems


def trl_problems(cfg: RunConfig, curriculum: Curriculum) -> list[str]:
    """What TRL's side refuses besides a run's refusals: a fixed-data curriculum (TRL takes that set as its
    dataset), a signal that reads the agent (TRL's trainer holds it), and for a multi-turn domain an agent whose
    chat template cannot carry TRL's tool calls."""
    problems = []
    if not curriculum.generates:
        problems.append(f"curriculum: {cfg.curriculum!r} trains on a fixed set; in TRL give that set to "
                        "GRPOTrainer as its dataset (genenv export writes it), no simulator is needed")
    signal = part(cfg, "signal")
    if curriculum.trains_simulator and cfg.env.update == "pg" and signal.reads_agent:
        problems.append(f"{signal.setting}: the signal reads the agent's gradients or likelihoods, which TRL's "
                        "trainer holds; use a signal that does not read the agent with TRL")
    if domain_class(cfg.domain.name).multi_turn and model_problem("agent.model", cfg.agent.model) is None:
        problem = agent_tool_call_problem(cfg.agent.model)
        if problem:
            problems.append(multi_turn_refusal(cfg.domain.name, problem))
    return problems


def agent_tool_call_problem(model: str) -> str | None:
    """Why TRL cannot take a multi-turn domain's actions as tool calls from ``model``'s chat template, or None."""
    if model == "tiny":
        return "the tiny model has no chat template"
    return tool_call_problem(AutoTokenizer.from_pretrained(resolve_model(model)))


def multi_turn_refusal(domain: str, problem: str) -> str:
    return (f"agent.model: domain {domain!r} is multi-turn, and TRL takes its actions as tool calls, which the "
            f"agent's chat template cannot carry ({problem}); {TOOL_CALL_ADVICE}")


@dataclass
class Survey:
    """What the preflight found: its ``problems`` (one line each, naming the field), and the curriculum and domain
    it built to find them (None where they could not be built: a problem says why)."""
    problems: list[str]
    curriculum: Curriculum | None
    domain: Domain | None


def survey(cfg: RunConfig, trl: bool = False) -> Survey:
    """Every problem of ``cfg`` (see the module's docstring); ``trl``: as TRL's side runs it (TRL decodes the
    agent: only the simulator's decoder is asked about)."""
    problems = player_problems(cfg, decoded=("env",) if trl else ("agent", "env"))
    curriculum = domain = None
    try:
        curriculum = make_curriculum(cfg.curriculum)
    except ConfigError as error:
        problems.append(str(error))
    try:
        check_config(cfg)   # the strategies' names, and the plugins' checks of their knobs
    except ConfigError as error:
        problems.append(str(error))
    try:
        domain = make_domain(cfg.domain.name, **cfg.domain.options)
    except ConfigError as error:
        problems.append(str(error))
    if curriculum is not None and domain is not None:
        problems += domain_problems(cfg, curriculum, domain)
    if trl and curriculum is not None:
        problems += trl_problems(cfg, curriculum)
    return Survey(problems, curriculum, domain)


def preflight(cfg: RunConfig, trl: bool = False) -> tuple[Curriculum, Domain]:
    """The curriculum and domain of ``cfg`` once :func:`survey` finds no problem; otherwise one ConfigError holding
    every problem, a line each."""
    found = survey(cfg, trl=trl)
    if found.problems:
        raise ConfigError("\n".join(found.problems))
    return found.curriculum, found.domain


def eval_problems(model: str, sampler: str, device: str) -> list[str]:
    """What ``genenv eval`` refuses before its model loads: the device, ``--model`` and ``--sampler``."""
    problems = [device_problem(device), model_problem("--model", model)]
    if problems[1] is None:
        problems.append(sampler_problem("--sampler", sampler, model, device))
    return [problem for problem in problems if problem]

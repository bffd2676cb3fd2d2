"""Issue 93, item 1: genenv's domains as verifiers tasksets, loaded by verifiers' own loader by id, their tasks the
run's own sets, their reward genenv's own on the same responses; vf-validate on every one; verifiers' own eval client
(vf-eval) against a real model server (llama.cpp on SmolLM2) on the apibank and multihop tasksets."""

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

vf = pytest.importorskip("verifiers.v1", reason="the verifiers extra (make install installs it)")

from llama_server import SERVED_NAME  # noqa: E402
from verifiers.v1.types import AssistantMessage, UserMessage  # noqa: E402
from verifiers.v1.utils.loaders import environment_class, load_taskset, taskset_class, taskset_config_type  # noqa: E402

from genenv.config import load_config  # noqa: E402
from genenv.domains import make_domain  # noqa: E402
from genenv.domains.apibank.evaluator import data_folder  # noqa: E402
from genenv.domains.multihop.bamboogle import load_questions  # noqa: E402
from genenv.domains.multihop.benchmark_eval import eval_bamboogle  # noqa: E402
from genenv.integrations.verifiers import TASKSET_IDS, DomainEnv, DomainTaskset, genenv_task  # noqa: E402
from genenv.models.policy import Generation  # noqa: E402
from genenv.rollout import replay, rollout  # noqa: E402
from genenv.splits import data_split, training_seed_tasks  # noqa: E402

VENV_BIN = Path(sys.executable).parent
TRAVEL_WORLD = Path(__file__).parent / "data" / "travel-world"   # hand-made tables in the official layout


APIBANK = Path(os.environ.get("GENENV_APIBANK_DATA", Path(__file__).resolve().parents[2] / "shared/data/api-bank"))


def apibank_data() -> str | None:
    """The API-Bank data (GENENV_APIBANK_DATA or ../shared/data/api-bank), or None (said) where it is absent."""
    try:
        return str(data_folder(APIBANK))
    except ValueError as error:
        print(f"API-Bank data not found at {APIBANK} ({error})")
        return None


def taskset(taskset_id: str, **config):
    return load_taskset(taskset_config_type(taskset_id)(id=taskset_id, **config))


def trace_of(task, replies: list[str]):
    """A trace as a verifiers rollout leaves it: the prompt, then each reply (sampled) and the next observation."""
    nodes = [vf.MessageNode(message=UserMessage(content=task.data.prompt_text))]
    for reply in replies:
        nodes.append(vf.MessageNode(parent=len(nodes) - 1, message=AssistantMessage(content=reply), sampled=True))
        nodes.append(vf.MessageNode(parent=len(nodes) - 1, message=UserMessage(content="obs")))
    return vf.Trace(task=vf.TraceTask(type=type(task).__name__, data=task.data), nodes=nodes,
                    agent=vf.AgentInfo(config=vf.AgentConfig(), name="agent"))


def reward_of(task, replies) -> float:
    """The taskset's reward of ``replies``, scored as verifiers scores a finished rollout."""
    trace = trace_of(task, replies)
    asyncio.run(task.score(trace))
    return trace.rewards["reward"].score


class ReplayPolicy:
    """genenv's side of the comparison: a policy whose answers are given responses, looked up by the episode's first
    observation (its prompt starts with it) and turn; rollout() scores them as a run scores its agent's."""

    def __init__(self, answers: dict[str, list[str]]):
        self.answers, self.taken = answers, {key: 0 for key in answers}

    def encode_prompts(self, prompts):
        return [[0] * len(p) for p in prompts]

    def generate(self, prompts, n=1, **kwargs):
        out = []
        for prompt in prompts:
            key = next(k for k in self.answers if prompt.startswith(k))
            turn, self.taken[key] = self.taken[key], self.taken[key] + 1
            replies = self.answers[key]
            text = replies[turn] if turn < len(replies) else ""
            out.append([Generation([0], [0], text, [0.0], True) for _ in range(n)])
        return out


def genenv_rewards(domain, tasks, answers: list[list[str]]) -> list[float]:
    """genenv's own rewards of ``answers`` (one list of replies per task) through rollout()."""
    firsts = [domain.agent_context([], domain.reset(task)[1]) for task in tasks]
    groups = rollout(domain, ReplayPolicy(dict(zip(firsts, answers))), tasks, greedy=True)
    return [group[0].reward for group in groups]


def test_every_genenv_taskset_loads_through_verifiers_own_loader():
    for taskset_id, domain in TASKSET_IDS.items():
        cls = taskset_class(taskset_id)
        assert issubclass(cls, DomainTaskset) and cls.__module__ == taskset_id.replace("-", "_")
        assert environment_class(taskset_id) is DomainEnv   # the episode runner the taskset's module exports
        assert taskset_config_type(taskset_id)().domain == domain
    # a domain by name: a plugin's too (the sorting example, importable from examples/)
    sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
    try:
        tasks = list(taskset("genenv-domain", domain="sorting_domain:SortingDomain", per_level=2))
    finally:
        sys.path.remove(str(Path(__file__).parents[1] / "examples"))
    assert len(tasks) == 2 * len(make_domain("sorting_domain:SortingDomain").levels())


def test_a_tasksets_tasks_are_the_runs_own_sets():
    cfg = load_config("smoke", ["domain.heldout_per_level=3", "domain.num_seed_tasks=40", "seed=5"])
    domain = make_domain("addition", **cfg.domain.options)
    split = data_split(cfg, domain)
    options = dict(cfg.domain.options)
    texts = {name: [genenv_task(t.data.genenv_task).text
                    for t in taskset("genenv-addition", split=name, per_level=3, num_seed_tasks=40, seed=5,
                                     options=options)]
             for name in ("heldout", "dev", "seed")}
    assert texts["heldout"] == [t.text for t in split.heldout]
    assert texts["dev"] == [t.text for t in split.dev]
    assert texts["seed"] == [t.text for t in training_seed_tasks(cfg, domain, split)]
    assert not set(texts["seed"]) & (set(texts["heldout"]) | set(texts["dev"]))
    # the taskset's prompt is the agent's first observation
    first = next(iter(taskset("genenv-addition", per_level=1, options=options)))
    assert first.data.prompt == domain.reset(genenv_task(first.data.genenv_task))[1]


HEDGES_AND_JUNK = ["", "   ", "answer:", "\x00\xff" * 10, "9" * 70_000, "answer: " + "x " * 500, "{]", "search:"]


@pytest.mark.parametrize("taskset_id,options", [("genenv-addition", {}), ("genenv-multihop", {}),
                                                 ("genenv-multihop", {"reward": "f1"}), ("genenv-household", {})])
def test_the_tasksets_reward_is_genenvs_on_the_same_responses(taskset_id, options):
    tasks = list(taskset(taskset_id, per_level=2, options=options))
    domain = tasks[0].domain()
    genenv_tasks = [genenv_task(t.data.genenv_task) for t in tasks]
    rng = np.random.default_rng(0)
    answers = []
    for task in genenv_tasks:   # the reference actions; or cut short at a random turn by junk; or junk throughout
        gold = [target for _, _, target in domain.warmstart_examples(task)]
        junk = [str(rng.choice(HEDGES_AND_JUNK)) for _ in range(domain.max_turns + 2)]
        kind = int(rng.integers(3))
        if kind == 0:
            answers.append(gold)
        elif kind == 1:
            answers.append(gold[:int(rng.integers(len(gold)))] + junk[:1])
        else:
            answers.append(junk)
    ours = [reward_of(task, replies) for task, replies in zip(tasks, answers)]
    assert ours == genenv_rewards(domain, genenv_tasks, answers)
    assert 0 < sum(ours) < len(ours)   # some solved, some not: the comparison can tell them apart


def test_a_taskset_never_raises_on_a_response():
    task = next(iter(taskset("genenv-multihop", per_level=1)))
    for reply in HEDGES_AND_JUNK:
        assert reward_of(task, [reply] * 9) == 0.0


@pytest.mark.slow
def test_vf_validate_passes_on_every_genenv_taskset(tmp_path):
    """verifiers' own checker: each task's reference actions solve it (gold) and no reply earns nothing (noop)."""
    options = {"genenv-apibank": {"data": apibank_data()}, "genenv-travel": {"data": str(TRAVEL_WORLD)}}
    for taskset_id in TASKSET_IDS:
        if options.get(taskset_id, {}).get("data", "") is None:
            continue   # no API-Bank data here (said above)
        out = tmp_path / taskset_id
        done = subprocess.run([str(VENV_BIN / "vf-validate"), taskset_id, "--taskset.per-level", "1",
                               "--taskset.options", json.dumps(options.get(taskset_id, {})),
                               "--runtime.type", "subprocess", "-o", str(out)],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (taskset_id, done.stdout[-3000:], done.stderr[-3000:])
        rows = [json.loads(line) for line in next(out.rglob("results.jsonl")).read_text().splitlines()]
        tasks = list(taskset(taskset_id, per_level=1, options=options.get(taskset_id, {})))
        assert len(rows) == len(tasks) and all(row["noop"]["valid"] for row in rows), (taskset_id, rows[:2])
        # gold: the task's reference actions solve it, as genenv scores them; API-Bank's official data holds items
        # whose own gold call fails (attendees='['John Smith', ...]': the API-Bank evaluation's "gold ceiling")
        solved = [replay(t.domain(), genenv_task(t.data.genenv_task),
                         [target for _, _, target in t.domain().warmstart_examples(genenv_task(t.data.genenv_task))]
                         ).reward == 1.0 for t in tasks]
        assert {row["index"]: row["gold"]["valid"] for row in rows} == dict(enumerate(solved)), taskset_id
        assert all(solved) or taskset_id == "genenv-apibank", taskset_id


def vf_eval(taskset_id: str, url: str, out: Path, *args: str) -> list[dict]:
    """verifiers' own eval client against the server; the traces it wrote, one per episode."""
    done = subprocess.run([str(VENV_BIN / "vf-eval"), taskset_id, "--no-push", "--client.base-url", url,
                           "--model", SERVED_NAME, "-c", "1", "--output-dir", str(out), *args],
                          capture_output=True, text=True, timeout=900, env={**os.environ, "OPENAI_API_KEY": "none"})
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    episodes = [json.loads(line) for file in out.rglob("traces.jsonl") for line in file.read_text().splitlines()]
    assert episodes and all(episode["ok"] for episode in episodes), done.stdout[-3000:]
    return [trace for episode in episodes for trace in episode["traces"]]


@pytest.mark.slow
@pytest.mark.parametrize("taskset_id", ["genenv-apibank", "genenv-multihop"])
def test_vf_eval_on_a_real_model_server_scores_as_genenv(llama_server, tmp_path, taskset_id):
    url, _ = llama_server
    options = {}
    if taskset_id == "genenv-apibank":
        options = {"data": apibank_data()}
        if options["data"] is None:
            pytest.skip("no API-Bank data here (said above)")
    items = 3 if taskset_id == "genenv-apibank" else 2   # (a multihop episode: 6 turns of SmolLM2)
    traces = vf_eval(taskset_id, url, tmp_path / "eval", "-n", str(items), "--sampling.max-tokens", "48",
                     "--sampling.temperature", "0", "--env.taskset.options", json.dumps(options))
    assert len(traces) == items
    data = traces[0]["task"]["data"]
    domain = make_domain(data["domain"], **data["options"])
    tasks = [genenv_task(trace["task"]["data"]["genenv_task"]) for trace in traces]
    answers = [[node["message"]["content"] or "" for node in trace["nodes"]
                if node["sampled"] and node["message"]["role"] == "assistant"] for trace in traces]
    assert all(answers), "every episode holds the model's replies"
    theirs = [trace["rewards"]["reward"]["score"] for trace in traces]
    print(taskset_id, "rewards:", theirs, "replies:", answers)
    assert theirs == genenv_rewards(domain, tasks, answers) == [replay(domain, t, a).reward
                                                                for t, a in zip(tasks, answers)]
    turns = [trace["metrics"]["turns"] for trace in traces]
    assert turns == [len(replay(domain, t, a).turns) for t, a in zip(tasks, answers)]
    if domain.multi_turn:   # the episode goes on past the first reply until the domain ends it
        assert all(len(a) > 1 for a in answers if not replay(domain, tasks[0], a[:1]).terminated)
        assert max(len(a) for a in answers) > 1, answers


BAMBOOGLE = Path(os.environ.get("GENENV_BAMBOOGLE_DATA", Path(__file__).resolve().parents[2] / "shared/data/bamboogle"))


class AnswersByQuestion:
    """A policy for ``genenv eval --benchmark bamboogle`` that answers each question with a given reply."""

    sampler = None

    def __init__(self, replies: dict[str, str]):
        self.replies = replies

    def encode_prompts(self, prompts):
        return [[0] * len(json.dumps(p)) for p in prompts]

    def generate(self, prompts, n=1, **kwargs):
        return [[Generation([0], [0], self.replies[p[-1]["content"]], [0.0], True)] for p in prompts]


def test_bamboogles_questions_score_as_the_benchmark_scores_them(tmp_path):
    """The taskset's reward (EM) and metric (F1) on each question equal genenv eval --benchmark bamboogle's on the same
    replies: the right answer, a hedge, a wrong one, nothing."""
    try:
        questions = load_questions(BAMBOOGLE)
    except ValueError as error:
        pytest.skip(f"Bamboogle data not found ({error})")
    tasks = list(taskset("genenv-bamboogle", data=str(BAMBOOGLE)))
    assert [t.data.answer for t in tasks] == [q["answer"] for q in questions]
    kinds = [lambda q: q["answer"], lambda q: f"Answer: {q['answer']}\nmore", lambda q: f"Paris {q['answer']}",
             lambda q: "Paris", lambda q: ""]
    replies = {f"Question: {q['question']}": kinds[i % len(kinds)](q) for i, q in enumerate(questions)}
    scores = eval_bamboogle("fake", BAMBOOGLE, tmp_path / "eval", policy=AnswersByQuestion(replies), log=lambda _: None)
    rows = [json.loads(line) for line in (tmp_path / "eval" / "results.jsonl").read_text().splitlines()]
    ours = []
    for task in tasks:
        trace = trace_of(task, [replies[task.data.prompt]])
        asyncio.run(task.score(trace))
        ours.append((trace.rewards["exact_match"].score, trace.metrics["f1"]))
    assert ours == [(row["em"], row["f1"]) for row in rows]
    assert 0 < scores["em"] < scores["f1"] < 1   # the hedges: F1 pays them, EM does not
    done = subprocess.run([str(VENV_BIN / "vf-validate"), "genenv-bamboogle", "--taskset.data", str(BAMBOOGLE),
                           "--runtime.type", "subprocess", "-o", str(tmp_path / "validate")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    rows = [json.loads(line) for line in next((tmp_path / "validate").rglob("results.jsonl")).read_text().splitlines()]
    assert len(rows) == len(questions) and all(row["gold"]["valid"] and row["noop"]["valid"] for row in rows)

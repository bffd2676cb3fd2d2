"""Issue 93, item 2: genenv's curriculum as an endless verifiers taskset (``genenv-curriculum``): the rewards of its
tasks' rollouts reach the curriculum, in the process that writes the tasks or in another one (through the state
folder's inbox), so p_hat and the learnt seed draw move with them; stopped and resumed, it goes on where it was;
through verifiers' own eval client (vf-eval) against a chat server on the loopback address."""

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verifiers.v1", reason="the verifiers extra (make install installs it)")

from fake_agent import answer, serve  # noqa: E402
from test_verifiers import trace_of  # noqa: E402
from verifiers.v1.utils.loaders import load_taskset, taskset_config_type  # noqa: E402

from genenv.integrations.verifiers import genenv_task  # noqa: E402
from genenv.integrations.verifiers_curriculum import Curriculum  # noqa: E402

ID = "genenv-curriculum"
SETTINGS = {"preset": "smoke", "overrides": ["env.seed_draw=learnt_frontier"], "group_size": 2}
SCORE_ELSEWHERE = """
import asyncio, json, sys
sys.path.insert(0, sys.argv[2])
from test_verifiers import trace_of
from genenv.integrations.verifiers_curriculum import CurriculumTask, CurriculumTaskData
for row in json.loads(open(sys.argv[1]).read()):
    task = CurriculumTask(CurriculumTaskData.model_validate(row["data"]))
    for _ in range(int(sys.argv[3])):
        asyncio.run(task.score(trace_of(task, [row["reply"]])))
"""


def stream(state: Path):
    """A fresh iteration of the taskset on ``state`` (as a new run would start one in this process)."""
    return iter(load_taskset(taskset_config_type(ID)(id=ID, state=str(state), **SETTINGS)))


def score(tasks, reply) -> None:
    for task in tasks:
        for _ in range(SETTINGS["group_size"]):
            asyncio.run(task.score(trace_of(task, [reply(genenv_task(task.data.genenv_task))])))


def take_round(tasks) -> list:
    """The next round's tasks from the stream."""
    first = next(tasks)
    out = [first]
    while True:
        task = next(tasks)
        if task.data.round != first.data.round:
            return out, task
        out.append(task)


def metrics(state: Path) -> list[dict]:
    return [json.loads(line) for line in (state / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(autouse=True)
def fresh_processes():
    """Each test starts as a new process would: no curriculum alive."""
    Curriculum.live.clear()
    yield
    Curriculum.live.clear()


def test_the_rewards_it_saw_move_p_hat_and_the_seed_draw(tmp_path):
    by_level = lambda task: answer(task.prompt)   # right on the tasks of levels 1-2, '0' above  # noqa: E731
    wrong = lambda task: "x"  # noqa: E731
    seen = {}
    for name, reply in (("by_level", by_level), ("wrong", wrong)):
        tasks = stream(tmp_path / name)
        round0, _ = take_round(tasks)   # (asking for the 13th task wrote round 1 before any reward: drop it)
        Curriculum.live.clear()
        score(round0, reply)            # ... the rewards reach the state folder's inbox
        tasks = stream(tmp_path / name)   # a new start: it reads the inbox, observes round 0, serves round 1 again
        round1, _ = take_round(tasks)
        seen[name] = (metrics(tmp_path / name)[0], [genenv_task(t.data.genenv_task).text for t in round1])
    (by_level_row, by_level_round1), (wrong_row, wrong_round1) = seen["by_level"], seen["wrong"]
    assert by_level_row["round"] == wrong_row["round"] == 0
    assert 0 < by_level_row["p_hat_mean"] < 1 and wrong_row["p_hat_mean"] == 0.0
    assert by_level_round1 == wrong_round1   # round 1 was written before round 0's rewards: the same tasks
    # round 2 is written after round 0 was observed: the learnt seed draw reads its p_hat
    rounds2 = []
    for name in ("by_level", "wrong"):
        Curriculum.live.clear()
        tasks = stream(tmp_path / name)
        round1, _ = take_round(tasks)
        score(round1, by_level if name == "by_level" else wrong)
        round2, _ = take_round(tasks)
        rounds2.append([genenv_task(t.data.genenv_task).text for t in round2])
        assert [r["round"] for r in metrics(tmp_path / name)] == [0, 1] and round2[0].data.round == 2
    assert rounds2[0] != rounds2[1]


def test_rewards_scored_in_another_process_reach_the_curriculum(tmp_path):
    tasks = stream(tmp_path / "state")
    round0, _ = take_round(tasks)
    rows = [{"data": t.data.model_dump(mode="json"), "reply": answer(t.data.prompt_text)} for t in round0]
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    done = subprocess.run([sys.executable, "-c", SCORE_ELSEWHERE, str(tmp_path / "rows.json"),
                           str(Path(__file__).parent), str(SETTINGS["group_size"])], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not (tmp_path / "state" / "metrics.jsonl").exists() or metrics(tmp_path / "state") == []
    _, round2_first = take_round(tasks)   # the writer reads the inbox before its next round: round 0 is observed
    assert [r["round"] for r in metrics(tmp_path / "state")] == [0] and round2_first.data.round == 2
    assert 0 < metrics(tmp_path / "state")[0]["p_hat_mean"] < 1


ROUNDS_IN_A_PROCESS = """
import itertools, json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
import test_verifiers_curriculum as T
tasks, rounds = T.stream(Path(sys.argv[1])), []
for _ in range(int(sys.argv[2])):
    rounds.append(list(itertools.islice(tasks, 12)))   # the smoke preset's tasks a round
    T.score(rounds[-1], lambda task: T.answer(task.prompt))
print(json.dumps([[(t.data.round, t.data.genenv_task["text"]) for t in r] for r in rounds]))
"""


def rounds_in_a_process(state: Path, rounds: int) -> list:
    """``rounds`` rounds of the taskset on ``state`` in a process of their own, each scored (the fake agent's rule):
    their (round, task text) lists."""
    done = subprocess.run([sys.executable, "-c", ROUNDS_IN_A_PROCESS, str(state), str(rounds),
                           str(Path(__file__).parent)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_stopped_and_resumed_it_writes_what_it_would_have(tmp_path):
    whole = rounds_in_a_process(tmp_path / "whole", 3)
    parts = rounds_in_a_process(tmp_path / "parts", 1) + rounds_in_a_process(tmp_path / "parts", 2)
    assert [[r for r, _ in tasks] for tasks in parts] == [[0] * 12, [1] * 12, [2] * 12]
    assert parts == whole
    assert [r["round"] for r in metrics(tmp_path / "parts")] == [0, 1, 2]
    assert metrics(tmp_path / "parts") == metrics(tmp_path / "whole")


@pytest.mark.slow
def test_vf_eval_runs_the_endless_taskset_and_a_second_run_goes_on(tmp_path):
    server, url = serve()
    state = tmp_path / "state"
    common = ["--no-push", "--client.base-url", url, "--model", "fake", "-c", "4", "-r", "2",
              "--env.taskset.preset", "smoke", "--env.taskset.overrides", json.dumps(SETTINGS["overrides"]),
              "--env.taskset.state", str(state), "--env.taskset.group-size", "2"]
    try:
        for run, n in (("first", 12), ("second", 12)):
            done = subprocess.run([str(Path(sys.executable).parent / "vf-eval"), ID, "-n", str(n),
                                   "--output-dir", str(tmp_path / run), *common], capture_output=True, text=True,
                                  timeout=900, env={**os.environ, "OPENAI_API_KEY": "none"})
            assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    finally:
        server.shutdown()
    rows = metrics(state)
    assert [r["round"] for r in rows] == [0, 1]   # 12 tasks a round: one round a run
    assert all(0 < r["p_hat_mean"] < 1 for r in rows)
    inbox = (state / "rewards.jsonl").read_text().splitlines()
    assert len(inbox) == 2 * (12 + 12)
    second = [json.loads(line) for file in (tmp_path / "second").rglob("traces.jsonl")
              for line in file.read_text().splitlines()]
    assert {episode["task"]["data"]["round"] for episode in second} == {1}   # the second run went on

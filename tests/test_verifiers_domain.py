"""Issue 93, item 3: any verifiers taskset as a genenv domain (``domain.name=verifiers:ID``): its tasks split by a keyed
hash into disjoint seed, dev and held-out sets, its reward functions the score (bounded), the curricula that need no
parser run on it through ``genenv run``, a generative one is refused at start naming the field, and ``genenv
check-domain`` runs on it. The taskset is a small one written here as verifiers' docs show (``vf-init``'s layout)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("verifiers.v1", reason="the verifiers extra (make install installs it)")

from genenv.cli import main  # noqa: E402
from genenv.coevolve import run  # noqa: E402
from genenv.config import ConfigError, load_config  # noqa: E402
from genenv.domains import make_domain  # noqa: E402
from genenv.io import read_jsonl  # noqa: E402

TASKSET = '''
import verifiers.v1 as vf


class ReverseData(vf.TaskData):
    answer: str


class ReverseTask(vf.Task[ReverseData]):
    @vf.reward(weight=1.0)
    async def reward(self, trace: vf.Trace) -> float:
        replies = trace.assistant_messages
        return float(bool(replies) and (replies[-1].content or "").strip() == self.data.answer)


class ReverseConfig(vf.TasksetConfig):
    num_tasks: int = 120


class ReverseTaskset(vf.Taskset[ReverseTask, ReverseConfig]):
    def load(self):
        for i in range(self.config.num_tasks):
            word = "".join("abcd"[(i // 4 ** k) % 4] for k in range(4))
            yield ReverseTask(ReverseData(id=f"w{i}", prompt=word + ">", answer=word[::-1]), self.config.task)


__all__ = ["ReverseTaskset"]
'''

BROKEN = TASKSET.replace("return float(", "raise RuntimeError('a bug in the reward')\n        return float(")
SANDBOXED = TASKSET.replace("async def reward(self, trace: vf.Trace)", "async def reward(self, trace, runtime)")


@pytest.fixture
def tasksets(tmp_path, monkeypatch):
    """The test's taskset modules, importable here and in the processes a run starts."""
    for name, source in (("reverse_taskset", TASKSET), ("broken_taskset", BROKEN), ("sandboxed_taskset", SANDBOXED)):
        (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return tmp_path


def test_its_tasks_split_by_a_keyed_hash_into_disjoint_stated_sets(tasksets):
    domain = make_domain("verifiers:reverse_taskset")
    heldout, dev = domain.heldout_tasks(1000), domain.dev_tasks(1000)
    seeds = domain.seed_tasks(np.random.default_rng(0), 1000)
    texts = [t.text for t in heldout], [t.text for t in dev], [t.text for t in seeds]
    assert sum(map(len, texts)) == 120 and len(set().union(*map(set, texts))) == 120   # disjoint, every task
    assert 4 <= len(heldout) <= 24 and 4 <= len(dev) <= 24   # 10% each, by hash
    again = make_domain("verifiers:reverse_taskset")
    assert [t.text for t in again.heldout_tasks(1000)] == texts[0]   # the same split on every construction
    other = make_domain("verifiers:reverse_taskset", split_key="another")
    assert [t.text for t in other.heldout_tasks(1000)] != texts[0]   # ... for the same key
    fewer = make_domain("verifiers:reverse_taskset", taskset={"num_tasks": 40})   # the taskset's own config
    assert len(fewer.tasks) == 40 and len(make_domain("verifiers:reverse_taskset", limit=30).tasks) == 30
    task = heldout[0]
    assert json.loads(task.text) == {"id": json.loads(task.text)["id"], "prompt": task.prompt, "answer": task.answer}
    assert task.prompt.endswith(">") and task.answer == task.prompt[:-1][::-1]
    assert task.meta["key"] == domain.tasks[task.text].key   # verifiers' own key, the one the split hashes


def test_its_reward_functions_are_the_score_bounded(tasksets):
    domain = make_domain("verifiers:reverse_taskset")
    task = domain.heldout_tasks(1)[0]
    assert domain.score(task, task.answer) == 1.0 and domain.score(task, " " + task.answer + "\n") == 1.0
    assert domain.score(task, task.answer[::-1]) == 0.0
    for junk in ("", "\x00" * 100, "x" * 70_000):
        assert domain.checked_step(domain.reset(task)[0], junk).reward == 0.0
    broken = make_domain("verifiers:broken_taskset")
    result = broken.checked_step(broken.reset(broken.heldout_tasks(1)[0])[0], "dcba")
    assert result.reward == 0.0 and result.terminated and "a bug in the reward" in result.error
    with pytest.raises(ConfigError, match="reward need a runtime"):
        make_domain("verifiers:sandboxed_taskset")
    with pytest.raises(ConfigError, match="verifiers taskset 'no_such_taskset'"):
        make_domain("verifiers:no_such_taskset")


def test_the_curricula_that_need_no_parser_run_on_it_and_a_generative_one_is_refused(tasksets, tmp_path):
    settings = ["domain.name=verifiers:reverse_taskset", "domain.options={}", "epochs=2"]
    for curriculum in ("genenv", "random"):
        with pytest.raises(ConfigError, match="^curriculum: "):
            run(load_config("smoke", [*settings, f"curriculum={curriculum}"]), tmp_path / curriculum,
                log=lambda _: None)
        assert not (tmp_path / curriculum).exists()   # refused before anything is written
    for curriculum in ("static", "learnability"):
        out = run(load_config("smoke", [*settings, f"curriculum={curriculum}"]), tmp_path / curriculum,
                  log=lambda _: None)
        rows = read_jsonl(out / "metrics.jsonl")
        assert [r["epoch"] for r in rows] == [0, 1] and rows[-1]["heldout_success"] is not None


def test_genenv_check_domain_runs_on_it(tasksets, capsys):
    code = main(["check-domain", "verifiers:reverse_taskset", "--examples", "50"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "seed_round_trip" in out


def test_a_taskset_in_a_subprocess_run_is_found_by_its_id(tasksets, tmp_path):
    done = subprocess.run([sys.executable, "-m", "genenv.cli", "run", "--preset", "smoke", "--out", str(tmp_path / "r"),
                           "domain.name=verifiers:reverse_taskset", "domain.options={}", "curriculum=static",
                           "epochs=1"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert Path(tmp_path / "r" / "metrics.jsonl").exists()

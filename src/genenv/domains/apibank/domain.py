"""API-Bank as a co-evolution domain: the agent writes one API call for a dialogue, API-Bank's executor and the
API's own check score it (:mod:`genenv.domains.apibank`).

A task is a dialogue state and its gold call, as one JSON object (the simulator writes the same)::

    {"apis": ["QueryStock"], "history": ["User: Hi", "AI: Hello!"], "request": "What was AAPL on 2022-01-03?",
     "call": {"name": "QueryStock", "arguments": {"stock_code": "AAPL", "date": "2022-01-03"}}}

``history`` holds earlier turns as the test files write them (``User: ...``, ``AI: ...``,
``API-Request: [Name(k='v')]->output``); ``request`` is the user's last turn. The agent sees API-Bank's own
instruction with the listed APIs' descriptions, the dialogue, and ``Generate API Request:``. Grounding (the
simulator proposes, the domain decides): every listed API exists and works offline, the gold call names one
of them with declared parameters only, all required ones, values of the declared types, and it executes
without an error on a fresh copy of the initial databases; its result becomes the gold the agent's call is
checked against. Seed, dev and corpus tasks are drawn procedurally from the API specs and the databases
(templated requests; never from the test items); the held-out set is the official level-1 API items whose API
works offline. ``level``: 1 + the call needs a login token + it has three or more arguments + the token only
appears in an earlier API result (the agent must carry it over).

Options: ``data`` (the API-Bank data folder, default ``$GENENV_APIBANK_DATA``), ``max_task_chars`` (keep
only tasks whose JSON is at most this long, for tiny models), ``prompt_style`` ('official': API-Bank's
instruction with every listed API's description; 'compact': the API names and the dialogue only, for tiny
test models).
"""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

import numpy as np

from genenv.domains.apibank.calls import extract_call, format_call
from genenv.domains.apibank.evaluator import LEVEL_FOLDERS, data_folder, load_api_items
from genenv.domains.apibank.scoring import score_call
from genenv.domains.apibank.tools import REGISTRY, CallError, ToolSession, convert, load_databases, value_shape
from genenv.domains.base import Domain, Invalid, Task, TaskShape, WarmStartKey, folder_fingerprint, register
from genenv.domains.jsontask import parse_json_object, stated_rate

MAX_APIS, MAX_HISTORY, MAX_TEXT = 6, 12, 400
HISTORY_PREFIXES = ("User: ", "AI: ", "API-Request: ")


def load_descriptions(folder: Path) -> tuple[str, dict[str, dict]]:
    """The instruction text before "API descriptions:" and every API description object the level-1/2 test
    files carry (API documentation, not test items)."""
    head, descriptions = None, {}
    for level in LEVEL_FOLDERS:
        for kind in ("api", "response"):
            path = folder / "test-data" / f"level-{level}-{kind}.json"
            if not path.exists():
                continue
            for item in json.loads(path.read_text()):
                instruction = item.get("instruction", "")
                if "API descriptions:" not in instruction:
                    continue
                before, after = instruction.split("API descriptions:", 1)
                head = head or before
                for line in after.splitlines():
                    if line.strip().startswith("{"):
                        try:
                            description = json.loads(line)
                        except json.JSONDecodeError:
                            continue
                        descriptions.setdefault(description.get("name"), description)
    if head is None:
        raise ValueError(f"{folder}/test-data: no instruction with API descriptions")
    return head, descriptions


@register("apibank")
class ApiBankDomain(Domain):
    alphabet = string.printable
    agent_max_new_tokens = 96
    env_max_new_tokens = 320
    warm_start_key = WarmStartKey(location_options=("data",))

    def __init__(self, data: str | None = None, max_task_chars: int | None = None, prompt_style: str = "official"):
        if prompt_style not in ("official", "compact"):
            raise TypeError(f"prompt_style must be 'official' or 'compact', got {prompt_style!r}")
        self.prompt_style = prompt_style
        try:
            self.folder = data_folder(data)
            self.head, self.descriptions = load_descriptions(self.folder)
        except ValueError as error:
            raise TypeError(str(error).replace("--data", "data")) from None
        self.databases = load_databases(self.folder / "init_database")
        self.max_task_chars = max_task_chars
        self._official: list[dict] | None = None
        self._official_keys: set[tuple] | None = None

    def data_fingerprint(self) -> str:
        return folder_fingerprint(self.folder, ("init_database", "lv1-lv2-samples", "test-data"))

    # -------------------------------------------------------------- rendering
    def instruction(self, apis: list[str]) -> str:
        if self.prompt_style == "compact":
            return "APIs: " + ", ".join(apis)
        return self.head + "API descriptions:\n" + "\n".join(json.dumps(self.descriptions[a]) for a in apis)

    def _task(self, apis, history, request, name, arguments) -> Task | Invalid:
        """Ground a dialogue state and its gold call (see the module docstring)."""
        problem = self._problem(apis, history, request, name, arguments)
        if problem:
            return Invalid(problem, "")
        session = ToolSession(self.databases)
        try:
            result = session.execute(name, arguments)
        except CallError as error:
            return Invalid(f"gold call cannot run: {error}", "")
        if result["exception"] is not None:
            return Invalid(f"gold call fails on a fresh state: {str(result['exception'])[:120]}", "")
        text = json.dumps({"apis": apis, "history": history, "request": request,
                           "call": {"name": name, "arguments": arguments}})
        if self.max_task_chars and len(text) > self.max_task_chars:
            return Invalid(f"longer than {self.max_task_chars} characters", text)
        dialogue = "\n".join([*history, f"User: {request}"])
        prompt = f"{self.instruction(apis)}\n{dialogue}\nGenerate API Request:\n"
        return Task(text, prompt, format_call(name, arguments), self._level(history, name, arguments),
                    meta={"gold": {"api_name": name, "result": json.loads(json.dumps(result, default=str))}})

    def _problem(self, apis, history, request, name, arguments) -> str | None:
        if not isinstance(apis, list) or not apis or len(apis) > MAX_APIS:
            return f"apis must be a list of 1-{MAX_APIS} API names"
        for api in apis:
            if isinstance(api, str) and api in REGISTRY and REGISTRY[api].needs_network:
                return f"{api} is unavailable offline"
            if not isinstance(api, str) or api not in self.descriptions or api not in REGISTRY:
                return f"unknown API {api!r}"
        if len(set(apis)) != len(apis):
            return "an API is listed twice"
        if not isinstance(history, list) or len(history) > MAX_HISTORY or not all(
                isinstance(line, str) and line.startswith(HISTORY_PREFIXES) and len(line) <= MAX_TEXT
                for line in history):
            return f"history must be at most {MAX_HISTORY} turns starting with User:, AI: or API-Request:"
        if not isinstance(request, str) or not request.strip():
            return "request must be a non-empty string"
        if len(request) > MAX_TEXT:
            return f"request is {len(request)} characters, longer than {MAX_TEXT}"
        if name not in apis:
            return "the gold call names an API that is not listed"
        if not isinstance(arguments, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                      for k, v in arguments.items()):
            return "arguments must map names to strings"
        tool = REGISTRY[name]
        for key, value in arguments.items():
            if key not in tool.inputs:
                return f"{name} has no parameter {key!r}"
            try:
                convert(value, tool.inputs[key], key)
            except CallError:
                return f"{key}: not a {tool.inputs[key]}"
        missing = [k for k in tool.inputs if k not in arguments and k not in tool.optional]
        return f"missing required parameter {missing[0]!r}" if missing else None

    @staticmethod
    def _level(history: list[str], name: str, arguments: dict) -> int:
        token = arguments.get("token")
        carried = bool(token) and any(line.startswith("API-Request:") and token in line for line in history) and \
            not any(line.startswith("User:") and token in line for line in history)
        return 1 + int("token" in REGISTRY[name].inputs) + int(len(arguments) >= 3) + int(carried)

    def levels(self):
        return [1, 2, 3, 4]

    # -------------------------------------------------------------- data
    def official_items(self) -> list[dict]:
        """The level-1 API items of the test files whose API works offline (the held-out set's source), each with
        its gold ``call`` parsed and its ``history`` (the dialogue lines before the request for a call)."""
        if self._official is None:
            self._official = []
            for item in load_api_items(self.folder, 1):
                if REGISTRY.get(item["gold"]["api_name"], REGISTRY["ToolSearcher"]).needs_network:
                    continue
                lines = item["input"].rstrip("\n").split("\n")
                self._official.append({**item, "call": extract_call(item["expected_output"]),
                                       "history": [line for line in lines[:-1] if line.startswith(HISTORY_PREFIXES)]})
        return self._official

    def heldout_tasks(self, per_level):
        """The official level-1 API items (offline APIs), their own prompts and gold results, ``per_level`` of each
        level in file order."""
        by_level: dict[int, list[Task]] = {}
        for item in self.official_items():
            call = item["call"]
            level = self._level(item["history"], call.name, call.arguments)
            text = json.dumps({"official": [item["file"], item["id"]], "call": {"name": call.name,
                                                                                "arguments": call.arguments}})
            instruction = item["instruction"]
            if self.prompt_style == "compact":
                instruction = "APIs: " + ", ".join(_described_names(instruction))
            task = Task(text, f"{instruction}\n{item['input']}", item["expected_output"], level,
                        meta={"gold": item["gold"]})
            by_level.setdefault(level, []).append(task)
        return [task for level in self.levels() for task in by_level.get(level, [])[:per_level]]

    def _generated(self, rng: np.random.Generator, level: int | None = None) -> Task | None:
        """A procedural task (of ``level`` if given); None when no sampler writes one for these databases."""
        for _ in range(200):
            sampler = SAMPLERS[int(rng.integers(len(SAMPLERS)))]
            try:
                parts = sampler(rng, self.databases)
            except (KeyError, IndexError, ValueError):  # a data folder without this sampler's database
                continue
            task = self._task(*parts)
            if isinstance(task, Task) and (level is None or task.level == level):
                return task
        return None

    def seed_tasks(self, rng, n):
        tasks, seen = [], set()
        for _ in range(50 * n):
            if len(tasks) >= n:
                break
            task = self._generated(rng)
            if task is not None and task.text not in seen:
                seen.add(task.text)
                tasks.append(task)
        return tasks

    def dev_tasks(self, per_level):
        rng = np.random.default_rng(1)
        tasks = [self._generated(rng, level) for level in self.levels() for _ in range(per_level)]
        return [task for task in tasks if task is not None]

    def simulator_corpus(self, rng, n):
        corpus = []
        for _ in range(n):
            stats = {"success_rate": None if rng.random() < 0.1 else float(rng.random())}
            seed, task = self._generated(rng), self._generated(rng)
            if seed is not None and task is not None:
                corpus.append((seed, stats, task))
        return corpus

    # -------------------------------------------------------------- simulator side
    def simulator_prompt(self, seed, stats):
        known = stated_rate(stats)
        return ("Write one new API-Bank task as a JSON object with keys apis, history, request, call (call = {name, "
                "arguments}, argument values are strings). The agent solved tasks like this one at rate "
                f"{known}; aim for a task it solves about half of the time.\nExample:\n{seed.text}\nNew task:\n")

    def offered_apis(self) -> list[str]:
        """Every API a task may list: described in the data, in the tool registry, working offline."""
        return sorted(n for n in self.descriptions if n in REGISTRY and not REGISTRY[n].needs_network)

    def task_shape(self):
        """The task object: 1-6 offered API names, at most 12 history lines (each opening with ``User: ``, ``AI: ``
        or ``API-Request: ``) and a request of at most 400 characters, and a gold call to one offered API with
        exactly its declared parameters (the required ones present), every value a string of at most 400
        characters in its parameter's value shape (:func:`~genenv.domains.apibank.tools.value_shape`: a token
        of an account, a time as the API prints it, a key the API looks up, digits for a number). Left to
        ``validate``: the call's API among those listed, no API twice, what depends on two values at once (a
        password and its user), the call running on a fresh state."""
        def call(name):
            tool = REGISTRY[name]
            return {"type": "object", "additionalProperties": False, "required": ["name", "arguments"],
                    "properties": {"name": {"const": name}, "arguments": {
                        "type": "object", "additionalProperties": False,
                        "properties": {key: {"type": "string", "maxLength": MAX_TEXT,
                                             **value_shape(tool, key, self.databases)} for key in tool.inputs},
                        "required": [key for key in tool.inputs if key not in tool.optional]}}}
        names = self.offered_apis()
        return TaskShape(json_schema={
            "type": "object", "additionalProperties": False, "required": ["apis", "history", "request", "call"],
            "properties": {
                "apis": {"type": "array", "items": {"enum": names}, "minItems": 1, "maxItems": MAX_APIS},
                "history": {"type": "array", "maxItems": MAX_HISTORY, "items": {
                    "type": "string", "maxLength": MAX_TEXT,
                    "pattern": "^(" + "|".join(re.escape(prefix) for prefix in HISTORY_PREFIXES) + ")"}},
                "request": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT},
                "call": {"anyOf": [call(name) for name in names]}}}, max_chars=self.max_task_chars)

    def parse_task(self, text):
        data = parse_json_object(text, ("apis", "history", "request", "call"))
        if isinstance(data, Invalid):
            return data
        call = data["call"]
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return Invalid("call must be {name: string, arguments: object}", text)
        return Task(text, "", None, 0, meta={"parts": (data["apis"], data["history"], data["request"], call["name"],
                                                       call.get("arguments", {}))})

    def validate(self, task):
        parts = task.meta.get("parts")
        if parts is None:
            return Invalid("not a parsed task", task.text)
        grounded = self._task(*parts)
        if isinstance(grounded, Invalid):
            return Invalid(grounded.reason, task.text)
        if official_key(parts[2], parts[3], parts[4]) in self.official_keys():
            return Invalid("equals an official test item", task.text)
        return grounded

    def official_keys(self) -> set[tuple]:
        """(last user turn, gold call) of every official item: a task with the same is rejected as a copy."""
        if self._official_keys is None:
            self._official_keys = set()
            for item in self.official_items():
                users = [line for line in item["history"] if line.startswith("User: ")]
                if users:
                    self._official_keys.add(official_key(users[-1][len("User: "):], item["call"].name,
                                                         item["call"].arguments))
        return self._official_keys

    # -------------------------------------------------------------- agent side
    def agent_context(self, history, observation):
        return observation

    def score(self, task, response):
        return 1.0 if score_call(response or "", task.meta["gold"], self.databases).correct else 0.0


def _described_names(instruction: str) -> list[str]:
    names = []
    for line in instruction.split("API descriptions:")[-1].splitlines():
        try:
            names.append(json.loads(line)["name"])
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
    return names


def official_key(request: str, name: str, arguments: dict) -> tuple:
    return (str(request).strip(), name, json.dumps(arguments, sort_keys=True))


# ============================================================================ procedural tasks

def _pick(rng, values):
    values = list(values)
    return values[int(rng.integers(len(values)))]


def _login(rng, databases, username, carried: bool):
    """The history lines that give the agent a user's token: said by the user, or fetched by an earlier call."""
    account = databases["Account"][username]
    if not carried:
        return [f"User: My token is {account['token']}."], account["token"]
    call = format_call("GetUserToken", {"username": username, "password": account["password"]})
    return [f"User: My username is {username} and my password is {account['password']}.",
            f"{call}->{{'token': '{account['token']}'}}"], account["token"]


def _user_item(rng, databases, table):
    key = _pick(rng, databases[table])
    return databases[table][key]


def _stock(rng, db):
    code = _pick(rng, db["Stock"])
    date = _pick(rng, db["Stock"][code])
    request = _pick(rng, [f"What was the stock price of {code} on {date}?", f"How much was {code} worth on {date}?"])
    return ["QueryStock"], [], request, "QueryStock", {"stock_code": code, "date": date}


def _wiki(rng, db):
    keyword = _pick(rng, db["Wiki"])
    return ["Wiki"], [], _pick(rng, [f"Can you look up {keyword} on Wikipedia?", f"Tell me about {keyword}."]), \
        "Wiki", {"keyword": keyword}


def _symptom(rng, db):
    symptom = _pick(rng, db["Symptom"])
    if rng.random() < 0.5:
        return ["SymptomSearch"], [], f"I have {symptom}. What could be the cause?", "SymptomSearch", \
            {"symptom": symptom}
    return ["EmergencyKnowledge"], [], f"What first aid should I give for {symptom}?", "EmergencyKnowledge", \
        {"symptom": symptom}


def _history(rng, db):
    date = "2023-" + _pick(rng, db["History"])
    return ["QueryHistoryToday"], [], f"What happened in history on {date}?", "QueryHistoryToday", {"date": date}


def _speech(rng, db):
    url = _pick(rng, db["SpeechRecognition"])
    return ["SpeechRecognition"], [], f"Please transcribe the audio file at {url}.", "SpeechRecognition", {"url": url}


def _calculator(rng, db):
    numbers = [str(int(rng.integers(1, 100))) for _ in range(int(rng.integers(2, 5)))]
    formula = numbers[0] + "".join(_pick(rng, "+-*") + n for n in numbers[1:])
    return ["Calculator"], [], f"Can you calculate {formula} for me?", "Calculator", {"formula": formula}


def _today(rng, db):
    return ["GetToday"], [], _pick(rng, ["What is the date today?", "Which day is it today?"]), "GetToday", {}


def _music(rng, db):
    name = _pick(rng, ["Yesterday", "Shape of You", "Bohemian Rhapsody", "Hotel California", "Imagine"])
    return ["PlayMusic"], [], f"Please play {name}.", "PlayMusic", {"music_name": name}


def _registration(rng, db):
    record = _user_item(rng, db, "Appointments")
    return ["QueryRegistration"], [], f"Does {record['patient_name']} have an appointment on {record['date']}?", \
        "QueryRegistration", {"patient_name": record["patient_name"], "date": record["date"]}


def _balance(rng, db):
    username = _pick(rng, [u for u in db["Bank"] if u in db["Account"]])
    history, token = _login(rng, db, username, carried=rng.random() < 0.5)
    return ["QueryBalance", "GetUserToken"], history, "What is my account balance?", "QueryBalance", {"token": token}


def _alarm(rng, db):
    item = _user_item(rng, db, "Alarm")
    history, token = _login(rng, db, item["username"], carried=rng.random() < 0.5)
    if rng.random() < 0.5:
        return ["QueryAlarm", "GetUserToken"], history, f"Do I have an alarm at {item['time']}?", "QueryAlarm", \
            {"token": token, "time": item["time"]}
    time = f"2023-0{int(rng.integers(1, 10))}-{int(rng.integers(10, 29))} 0{int(rng.integers(5, 10))}:30:00"
    return ["AddAlarm", "GetUserToken"], history, f"Set an alarm for {time}.", "AddAlarm", {"token": token,
                                                                                           "time": time}


def _reminder(rng, db):
    item = _user_item(rng, db, "Reminder")
    history, token = _login(rng, db, item["username"], carried=rng.random() < 0.5)
    return ["QueryReminder", "GetUserToken"], history, \
        f"Can you find my reminder '{item['content']}' at {item['time']}?", "QueryReminder", \
        {"token": token, "content": item["content"], "time": item["time"]}


def _email(rng, db):
    receiver = _pick(rng, ["john@example.com", "mary_lee@mail.com", "team.lead@company.org", "bob99@test.com"])
    subject = _pick(rng, ["Meeting", "Report", "Lunch", "Holiday"])
    content = _pick(rng, ["See you tomorrow", "The report is attached", "Are you free at noon", "Happy holidays"])
    return ["SendEmail"], [], f"Send an email to {receiver} with subject {subject}: {content}.", "SendEmail", \
        {"receiver": receiver, "subject": subject, "content": content}


def _hotel(rng, db):
    day = int(rng.integers(1, 20))
    nights = int(rng.integers(1, 5))
    arguments = {"hotel_name": _pick(rng, ["Grand Plaza", "Seaside Inn", "Mountain Lodge"]),
                 "check_in_time": f"2024-05-{day:02d}", "check_out_time": f"2024-05-{day + nights:02d}",
                 "room_count": str(int(rng.integers(1, 3))), "adult_count": "2",
                 "child_count": str(int(rng.integers(0, 3)))}
    request = (f"Book {arguments['room_count']} room(s) at {arguments['hotel_name']} from {arguments['check_in_time']} "
               f"to {arguments['check_out_time']} for 2 adults and {arguments['child_count']} children.")
    return ["BookHotel"], [], request, "BookHotel", arguments


SAMPLERS = [_stock, _wiki, _symptom, _history, _speech, _calculator, _today, _music, _registration, _balance,
            _alarm, _reminder, _email, _hotel]

__all__ = ["ApiBankDomain", "load_descriptions", "official_key", "SAMPLERS"]

"""API-Bank's simulated level-1/2 APIs as a pure-Python registry, written from our SPEC.md of the benchmark.

Each API is a :class:`Tool`: its declared inputs (name -> type, which are optional), the database it reads
and writes, what it does (``run``: return the output or raise :class:`ToolError`) and its own correctness check
(``check(pred, gold)`` on two result envelopes). :class:`ToolSession` holds one state (a private copy of the
initial databases) and executes parsed calls into envelopes ``{api_name, input, output, exception}``:
errors raised inside an API become the envelope's ``exception``; errors of the call itself (unknown API,
undeclared parameter, a value of the wrong type, a missing argument) raise :class:`CallError`, which the
evaluators score as a wrong call. Behaviour is upstream-compatible, quirks included (SPEC.md sections 2-3):
lists arrive as strings, some checks are lenient or crash, and those quirks are what the official numbers
measure.
"""

from __future__ import annotations

import abc
import copy
import json
import random
import re
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

T_FORMAT, D_FORMAT = "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"


class ToolError(Exception):
    """An error inside an API: the call is made, its result carries the error text."""


class CallError(Exception):
    """The call cannot be made (unknown API, bad parameter name or type, missing argument): scored wrong."""


class CheckCrash(Exception):
    """The API's own check failed with an error (upstream: a KeyError or assertion, counted wrong)."""


# ============================================================================ helpers

def parse_time(text: str, fmt: str = T_FORMAT) -> datetime:
    try:
        return datetime.strptime(text, fmt)
    except (TypeError, ValueError) as error:
        raise ToolError(str(error)) from None


def normalise_time(text, fmt: str) -> str:
    """Strip; pad the year of a three-part date to 4 digits; parse with ``fmt`` and print it back."""
    text = str(text).strip()
    parts = text.split("-")
    if len(parts) == 3:
        text = "-".join([parts[0].zfill(4), *parts[1:]])
    return parse_time(text, fmt).strftime(fmt)


def try_normalise(text, fmt: str):
    try:
        return normalise_time(text, fmt)
    except ToolError as error:
        return str(error)


def jaccard_above_half(a: str, b: str) -> bool:
    left, right = set(str(a).split(" ")), set(str(b).split(" "))
    union = left | right
    return bool(union) and len(left & right) / len(union) > 0.5


def _validate_if_given(time: str) -> None:
    """Modify/Delete/Query of agenda items and meetings check the format of a time only when one is given."""
    if str(time).strip():
        parse_time(time)


def _strip(value) -> str:
    return str(value).strip()


# ============================================================================ value shapes (issue 57)
# What a parameter's value must look like for a call to run on a fresh state, as a JSON-schema fragment: the
# simulator's grammar (``ApiBankDomain.task_shape``) offers only these values. A shape is the canonical spelling
# of what the API accepts: every value it excludes either fails on a fresh state or is another spelling (case,
# surrounding spaces, an unpadded month, a digit or letter outside ASCII) of a value it offers. What depends on
# two values at once (a password and its user, an alarm at a time the user has) stays with the domain's check,
# which runs the call.

_DAY = "[0-9]{4}-[0-9]{2}-[0-9]{2}"
_MOMENT = _DAY + " [0-9]{2}:[0-9]{2}:[0-9]{2}"
MOMENT = {"pattern": f"^{_MOMENT}$"}                # T_FORMAT, as the APIs print it
DAY = {"pattern": f"^{_DAY}$"}                      # D_FORMAT
MOMENT_OR_EMPTY = {"pattern": f"^({_MOMENT})?$"}    # a time the API checks only when one is given
TYPE_SHAPES = {"int": {"pattern": "^[0-9]+$"},      # what convert() accepts, in ASCII digits
               "float": {"pattern": r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)$"}}


def keys_of(database: str, case: str | None = None) -> Callable[[dict], dict]:
    """The values a lookup in ``database`` finds: its keys (an enum). ``case``: the API compares keys after
    ``"lower"``-ing or ``"upper"``-ing the value, so the key's usual casings are offered too ("movie time",
    "Movie time", "Movie Time"; "AAPL", "aapl")."""
    def spellings(key: str) -> set[str]:
        if case == "lower":
            return {key, key.capitalize(), key.title()}
        return {key, key.lower()} if case == "upper" else {key}

    def shape(databases: dict) -> dict:
        return {"enum": sorted(set().union(*(spellings(str(key)) for key in databases[database])))}
    return shape


def tokens(databases: dict) -> dict:
    """A token ``user_of`` finds: one of the accounts' tokens."""
    return {"enum": sorted({account["token"] for account in databases["Account"].values()})}


def banked_tokens(databases: dict) -> dict:
    """The token of an account that has a bank account (QueryBalance)."""
    return {"enum": sorted({account["token"] for name, account in databases["Account"].items()
                            if name in databases["Bank"]})}


def history_days(databases: dict) -> dict:
    """QueryHistoryToday's date: a day the History database has, as month-day with or without a year."""
    days = "|".join(re.escape(day) for day in sorted(databases["History"]))
    return {"pattern": f"^([0-9]{{4}}-)?({days})$"}


def value_shape(tool: type["Tool"], key: str, databases: dict) -> dict:
    """The JSON-schema fragment ``tool``'s parameter ``key`` must satisfy to run on a fresh state of ``databases``
    (beside being a string): the tool's declared shape, else its type's; {} when nothing more is known or the
    database the shape reads is absent."""
    shape = tool.shapes.get(key, TYPE_SHAPES.get(tool.inputs[key], {}))
    if callable(shape):
        try:
            shape = shape(databases)
        except KeyError:
            return {}
    return dict(shape)


# ============================================================================ the tool base

class Tool(abc.ABC):
    """One API. ``inputs``: declared parameters (name -> "str", "int", "float", "bool", "list", "list(str)");
    ``optional``: those that may be omitted; ``database``: the init_database file it works on. (Descriptions
    shown to models come from the user's test files, not from here.)"""
    name = ""
    inputs: dict[str, str] = {}
    optional: frozenset = frozenset()
    database: str | None = None
    needs_network = False
    shapes: dict[str, dict | Callable[[dict], dict]] = {}  # parameter -> value shape (see value_shape)
    asserts_api_name = False  # some upstream checks assert equal api_name first (an error: scored wrong)

    def __init__(self, session: "ToolSession"):
        self.session = session
        self.db = session.databases.get(self.database) if self.database else None

    # -- running
    @abc.abstractmethod
    def run(self, **kwargs):
        """The output of a call with these (typed) arguments; raise ToolError for an error inside the API."""

    def input_record(self, kwargs: dict) -> Any:
        """The envelope's ``input``: the parameters as received (some APIs differ, SPEC 2.1)."""
        return dict(kwargs)

    # -- checking
    def check(self, pred: dict, gold: dict) -> bool:
        """Full equality of input, output and exception (the default check)."""
        return pred["input"] == gold["input"] and pred["output"] == gold["output"] and \
            pred["exception"] == gold["exception"]

    # -- shared pieces
    def _assert_same_api(self, pred: dict, gold: dict) -> None:
        if self.asserts_api_name and pred.get("api_name") != gold.get("api_name"):
            raise CheckCrash("api_name differs")

    def user_of(self, token, message: str = "token is invalid") -> str:
        for username, account in self.session.databases["Account"].items():
            if account.get("token") == token:
                return username
        raise ToolError(message)


REGISTRY: dict[str, type[Tool]] = {}


def register(cls: type[Tool]) -> type[Tool]:
    cls.name = cls.name or cls.__name__
    REGISTRY[cls.name] = cls
    return cls


def _same(pred: dict, gold: dict, *keys: str) -> bool:
    return all(pred.get(k) == gold.get(k) for k in keys)


def _outputs_and_exceptions(pred: dict, gold: dict) -> bool:
    return _same(pred, gold, "output", "exception")


def _deletion_check(self, pred: dict, gold: dict) -> bool:
    """DeleteAgenda's and DeleteReminder's check: two successes compare only the time; else the outcomes."""
    if pred["output"] == "success" and gold["output"] == "success":
        return _inputs_equal_under(pred, gold, "time", lambda v: v)
    return _outputs_and_exceptions(pred, gold)


def _inputs_equal_under(pred: dict, gold: dict, key: str, normalise: Callable) -> bool:
    try:
        return normalise(pred["input"][key]) == normalise(gold["input"][key])
    except (KeyError, TypeError) as error:
        raise CheckCrash(repr(error)) from None


# ============================================================================ the session

class ToolSession:
    """One state of the simulated services: a private deep copy of the initial databases, tools made lazily."""

    def __init__(self, databases: dict[str, Any]):
        self.databases = _Copies(databases)
        self._tools: dict[str, Tool] = {}
        self.random = random.Random(0)

    def tool(self, name: str) -> Tool:
        if name not in REGISTRY:
            raise CallError(f"invalid tool name {name}")
        if name not in self._tools:
            self._tools[name] = REGISTRY[name](self)
        return self._tools[name]

    def execute(self, name: str, arguments: dict[str, str]) -> dict:
        """Run a parsed call (string values, SPEC 2.4 typing) and return its result envelope."""
        tool = self.tool(name)
        if tool.needs_network:
            raise Unavailable(name)
        kwargs = {}
        for key, value in arguments.items():
            if key not in tool.inputs:
                raise CallError(f"invalid parameter name {key}")
            kwargs[key] = convert(value, tool.inputs[key], key)
        missing = [k for k in tool.inputs if k not in kwargs and k not in tool.optional]
        if missing:
            raise CallError(f"{name} missing {len(missing)} required argument(s): {', '.join(missing)}")
        record = tool.input_record(kwargs)
        try:
            output, exception = tool.run(**kwargs), None
        except ToolError as error:
            output, exception = None, str(error)
        envelope = {"api_name": tool.name, "input": record, "output": output, "exception": exception}
        return envelope


class _Copies(dict):
    """A session's databases: each one deep-copied from the initial state the first time a tool touches it (a
    fresh state per scored item stays cheap; the 12k-entry ImageCaptioning list is copied only when used)."""

    def __init__(self, source: dict[str, Any]):
        super().__init__()
        self._source = source

    def __missing__(self, key):
        if key not in self._source:
            raise KeyError(key)
        value = self[key] = copy.deepcopy(self._source[key])
        return value

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default


class Unavailable(Exception):
    """An API that needs the network or a model this machine does not have (counted apart)."""


def convert(value: str, declared: str, key: str):
    """A parsed argument (always a string) as its declared type, as API-Bank's tool manager converts it (SPEC 2.4):
    ``int`` digits only, ``float`` digits with at most one ``.``. "Digits" are what Python's ``str.isdigit`` and
    ``int``/``float`` accept together, as in the original: digits of any script that Python converts (Arabic-Indic
    ``'٣'`` is 3, a correct value); a character ``isdigit`` accepts but ``int`` cannot convert (a superscript
    ``'¹'``) is a wrong call, "invalid parameter type", where the original raised an uncaught ValueError."""
    if declared == "int":
        if not (isinstance(value, str) and value.isdigit()):
            raise CallError(f"invalid parameter type {key}")
        try:
            return int(value)
        except ValueError:
            raise CallError(f"invalid parameter type {key}: {value!r} is not a number Python converts") from None
    if declared == "float":
        if not (isinstance(value, str) and value.replace(".", "", 1).isdigit()):
            raise CallError(f"invalid parameter type {key}")
        try:
            return float(value)
        except ValueError:
            raise CallError(f"invalid parameter type {key}: {value!r} is not a number Python converts") from None
    if declared == "bool":
        return value == "True"
    if declared in ("str", "list", "list(str)"):
        return value
    raise CallError(f"unsupported parameter type {declared}")


def load_databases(folder: str | Path) -> dict[str, Any]:
    """Every ``init_database/*.json``, keyed by file name without ``.json``."""
    folder = Path(folder)
    return {path.stem: json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))}


# ============================================================================ accounts

@register
class CheckToken(Tool):
    inputs = {"token": "str"}
    shapes = {"token": tokens}
    database = "Account"

    def run(self, token):
        return {"username": self.user_of(token)}


@register
class GetUserToken(Tool):
    inputs = {"username": "str", "password": "str"}
    shapes = {"username": keys_of("Account")}
    database = "Account"

    def run(self, username, password):
        if username not in self.db:
            raise ToolError("The username does not exist.")
        if self.db[username]["password"] != password:
            raise ToolError("The password is incorrect.")
        return {"token": self.db[username]["token"]}


@register
class RegisterUser(Tool):
    inputs = {"username": "str", "password": "str", "email": "str"}
    database = "Account"

    def run(self, username, password, email):
        if username in self.db:
            raise ToolError("The username already exists.")
        token = "".join(self.session.random.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(18))
        self.db[username] = {"password": password, "token": token, "email": email}
        return {"token": token}

    def check(self, pred, gold):
        if pred["input"] != gold["input"] or pred["exception"] != gold["exception"]:
            return False
        return not (gold["output"] is None and pred["output"] is not None)


@register
class DeleteAccount(Tool):
    inputs = {"token": "str"}
    shapes = {"token": tokens}
    database = "Account"

    def run(self, token):
        username = self.user_of(token)
        if username not in self.db:
            raise ToolError("The user does not exist.")
        del self.db[username]
        return {"status": "success"}


@register
class ModifyPassword(Tool):
    inputs = {"token": "str", "old_password": "str", "new_password": "str"}
    shapes = {"token": tokens}
    database = "Account"

    def run(self, token, old_password, new_password):
        username = self.user_of(token)
        if self.db[username]["password"] != old_password:
            raise ToolError("The old password is incorrect.")
        self.db[username]["password"] = new_password
        return {"status": "success"}


@register
class ForgotPassword(Tool):
    inputs = {"status": "str", "username": "str", "email": "str", "verification_code": "int", "new_password": "str"}
    optional = frozenset({"username", "email", "verification_code", "new_password"})
    database = "Account"
    CODE = 970420

    def __init__(self, session):
        super().__init__(session)
        self.pending_user = None

    def input_record(self, kwargs):
        return dict(kwargs)

    def run(self, status, **kwargs):
        if status == "Forgot Password":
            username, email = kwargs.get("username"), kwargs.get("email")
            if username is None or email is None:
                raise ToolError("Username and email are required.")
            if username not in self.db:
                raise ToolError("The username does not exist.")
            if self.db[username]["email"] != email:
                raise ToolError("The email is incorrect.")
            self.pending_user = username
            return self.CODE
        if status == "Verification Code":
            if self.pending_user is None:
                raise ToolError("Please call Forgot Password first.")
            code, new_password = kwargs.get("verification_code"), kwargs.get("new_password")
            if code is None or new_password is None:
                raise ToolError("Verification code and new password are required.")
            if int(code) != self.CODE:
                raise ToolError("The verification code is incorrect.")
            self.db[self.pending_user]["password"] = new_password
            return "success"
        raise ToolError("The status is invalid.")


@register
class OpenBankAccount(Tool):
    inputs = {"account": "str", "password": "str", "name": "str"}

    def __init__(self, session):
        super().__init__(session)
        self.accounts = {"test": {"password": "test", "name": "test"}}

    def run(self, account, password, name):
        if account in self.accounts:
            return "failed"
        self.accounts[account] = {"password": password, "name": name}
        return "success"


@register
class QueryBalance(Tool):
    inputs = {"token": "str"}
    shapes = {"token": banked_tokens}
    database = "Bank"

    def run(self, token):
        username = self.user_of(token, "token is incorrect")
        if username not in self.db:
            raise ToolError("The user has no bank account.")
        return self.db[username]["balance"]

    def check(self, pred, gold):
        return _inputs_equal_under(pred, gold, "token", _strip) and _outputs_and_exceptions(pred, gold)


# ============================================================================ agenda, alarms, reminders, meetings

def _first_match(table: dict, username: str, **fields) -> str | None:
    """The key of the user's first item one of whose given fields equals the given value."""
    for key, item in table.items():
        if item.get("username") == username and any(item.get(f) == v for f, v in fields.items()):
            return key
    return None


class _AgendaTool(Tool):
    inputs = {"token": "str", "content": "str", "time": "str", "location": "str"}
    shapes = {"token": tokens, "time": MOMENT_OR_EMPTY}
    database = "Agenda"

    def check(self, pred, gold):
        self._assert_same_api(pred, gold)
        try:
            pi, gi = pred["input"], gold["input"]
            return jaccard_above_half(pi["content"], gi["content"]) and pi["time"] == gi["time"] and \
                pi["location"] == gi["location"] and _outputs_and_exceptions(pred, gold)
        except (KeyError, TypeError) as error:
            raise CheckCrash(repr(error)) from None

    def _match(self, token, content, time):
        """The user's first item whose content or time equals the given one (a given time must be valid)."""
        _validate_if_given(time)
        return _first_match(self.db, self.user_of(token), content=content, time=time)

    def _missing(self, content, time):
        return f"no agenda about {content}" if content else f"no agenda at time {time}"


@register
class AddAgenda(_AgendaTool):
    shapes = {"token": tokens, "time": MOMENT}
    asserts_api_name = True
    def run(self, token, content, time, location):
        parse_time(time)
        if not content.strip():
            raise ToolError("Content should not be null")
        username = self.user_of(token)
        self.db[str(len(self.db) + 1)] = {"username": username, "content": content, "time": time,
                                          "location": location}
        return "success"


@register
class ModifyAgenda(_AgendaTool):
    def run(self, token, content, time, location):
        key = self._match(token, content, time)
        if key is None:
            if not content and not time:
                return {"error": "Content and time should not be both null"}
            raise ToolError(self._missing(content, time))
        self.db[key].update(content=content, time=time, location=location)
        return "success"


@register
class DeleteAgenda(_AgendaTool):
    def run(self, token, content, time, location):
        key = self._match(token, content, time)
        if key is None:
            if not content and not time:
                return "success"
            raise ToolError(f"no meeting about {content}" if content else f"no meeting at time {time}")
        del self.db[key]
        return "success"

    check = _deletion_check


@register
class QueryAgenda(_AgendaTool):
    def run(self, token, content, time, location):
        if not content and not time:
            raise ToolError("Content and time should not be both null")
        key = self._match(token, content, time)
        if key is None:
            raise ToolError(self._missing(content, time))
        return copy.deepcopy(self.db[key])


class _AlarmTool(Tool):
    shapes = {"token": tokens, "time": MOMENT, "from_time": MOMENT, "to_time": MOMENT}
    database = "Alarm"

    def _find(self, username, time):
        return next((k for k, v in self.db.items() if v.get("username") == username and v.get("time") == time), None)

    def _alarm_at(self, token, time):
        """The key of the token's user's alarm at ``time`` (a valid T time), or an error."""
        parse_time(time)
        key = self._find(self.user_of(token), time)
        if key is None:
            raise ToolError(f"You have no alarm at time : {time}")
        return key


@register
class AddAlarm(_AlarmTool):
    inputs = {"token": "str", "time": "str"}

    def run(self, token, time):
        parse_time(time)
        username = self.user_of(token)
        self.db[str(len(self.db) + 1)] = {"username": username, "time": time}
        return "success"


@register
class ModifyAlarm(_AlarmTool):
    inputs = {"token": "str", "from_time": "str", "to_time": "str"}

    def run(self, token, from_time, to_time):
        parse_time(from_time), parse_time(to_time)
        username = self.user_of(token)
        key = self._find(username, from_time)
        if key is None:
            raise ToolError(f"You have no agenda at time : {from_time}")
        self.db[key]["time"] = to_time
        return "success"


@register
class DeleteAlarm(_AlarmTool):
    inputs = {"token": "str", "time": "str"}

    def run(self, token, time):
        del self.db[self._alarm_at(token, time)]
        return "success"


@register
class QueryAlarm(_AlarmTool):
    inputs = {"token": "str", "time": "str"}

    def run(self, token, time):
        key = self._alarm_at(token, time)
        return {"time": self.db[key]["time"], "username": self.db[key]["username"]}


def _next_numeric_key(table: dict) -> str:
    return str(max((int(k) for k in table if str(k).isdigit()), default=0) + 1)


class _ReminderTool(Tool):
    inputs = {"token": "str", "content": "str", "time": "str"}
    shapes = {"token": tokens, "time": MOMENT}
    database = "Reminder"

    def _validate(self, content, time):
        parse_time(time)
        if not content.strip():
            raise ToolError("Content should not be null")

    def _find(self, token, content, time):
        username = self.user_of(token)
        key = _first_match(self.db, username, content=content, time=time)
        if key is None:
            raise ToolError(f"You have no reminder about {content} or at time : {time}")
        return key

    def check(self, pred, gold):
        self._assert_same_api(pred, gold)
        try:
            pi, gi = pred["input"], gold["input"]
            return jaccard_above_half(str(pi["content"]).lower(), str(gi["content"]).lower()) and \
                pi["time"] == gi["time"] and _outputs_and_exceptions(pred, gold)
        except (KeyError, TypeError) as error:
            raise CheckCrash(repr(error)) from None


@register
class AddReminder(_ReminderTool):
    asserts_api_name = True
    def run(self, token, content, time):
        self._validate(content, time)
        username = self.user_of(token)
        self.db[_next_numeric_key(self.db)] = {"content": content, "time": time, "username": username}
        return "success"



@register
class ModifyReminder(_ReminderTool):
    asserts_api_name = True
    def run(self, token, content, time):
        self._validate(content, time)
        key = self._find(token, content, time)
        self.db[key].update(content=content, time=time)
        return "success"



@register
class DeleteReminder(_ReminderTool):
    def run(self, token, content, time):
        self._validate(content, time)
        del self.db[self._find(token, content, time)]
        return "success"

    check = _deletion_check


@register
class QueryReminder(_ReminderTool):
    def run(self, token, content, time):
        self._validate(content, time)
        return copy.deepcopy(self.db[self._find(token, content, time)])


class _MeetingTool(Tool):
    inputs = {"token": "str", "meeting_topic": "str", "start_time": "str", "end_time": "str", "location": "str",
              "attendees": "list(str)"}
    shapes = {"token": tokens, "start_time": MOMENT_OR_EMPTY, "end_time": MOMENT_OR_EMPTY}
    database = "Meeting"

    def _validate_find(self, meeting_topic, start_time, end_time):
        _validate_if_given(start_time), _validate_if_given(end_time)
        if not start_time.strip() and not meeting_topic.strip():
            raise ToolError("Meeting Topic and Start time should not be both null")

    def _find(self, token, meeting_topic, start_time):
        username = self.user_of(token)
        key = _first_match(self.db, username, meeting_topic=meeting_topic, start_time=start_time)
        if key is None:
            raise ToolError(f"no meeting about {meeting_topic}" if meeting_topic.strip()
                            else f"no meeting at {start_time}")
        return key

    def check(self, pred, gold):
        try:
            pi, gi = dict(pred["input"]), dict(gold["input"])
            topics = jaccard_above_half(pi.pop("meeting_topic"), gi.pop("meeting_topic"))
        except (KeyError, TypeError) as error:
            raise CheckCrash(repr(error)) from None
        return topics and pi == gi and _outputs_and_exceptions(pred, gold)


@register
class AddMeeting(_MeetingTool):
    shapes = {"token": tokens, "start_time": MOMENT, "end_time": MOMENT}

    def run(self, token, meeting_topic, start_time, end_time, location, attendees):
        parse_time(start_time), parse_time(end_time)
        if not meeting_topic.strip():
            raise ToolError("Meeting Topic should not be null")
        username = self.user_of(token)
        self.db[_next_numeric_key(self.db)] = {
            "meeting_topic": meeting_topic, "start_time": start_time, "end_time": end_time, "location": location,
            "attendees": attendees, "username": username}
        return "success"


@register
class ModifyMeeting(_MeetingTool):
    def run(self, token, meeting_topic, start_time, end_time, location, attendees):
        self._validate_find(meeting_topic, start_time, end_time)
        key = self._find(token, meeting_topic, start_time)
        self.db[key].update(meeting_topic=meeting_topic, start_time=start_time, end_time=end_time)
        return "success"


@register
class DeleteMeeting(_MeetingTool):
    def run(self, token, meeting_topic, start_time, end_time, location, attendees):
        self._validate_find(meeting_topic, start_time, end_time)
        del self.db[self._find(token, meeting_topic, start_time)]
        return "success"

    def check(self, pred, gold):
        if pred["output"] == "success" and gold["output"] == "success":
            raise CheckCrash("KeyError: 'time'")  # upstream compares an input DeleteMeeting does not have
        return _outputs_and_exceptions(pred, gold)


@register
class QueryMeeting(_MeetingTool):
    def run(self, token, meeting_topic, start_time, end_time, location, attendees):
        self._validate_find(meeting_topic, start_time, end_time)
        return copy.deepcopy(self.db[self._find(token, meeting_topic, start_time)])


# ============================================================================ hotel, hospital, health

@register
class BookHotel(Tool):
    inputs = {"hotel_name": "str", "check_in_time": "str", "check_out_time": "str", "room_count": "int",
              "adult_count": "int", "child_count": "int"}
    shapes = {"check_in_time": DAY, "check_out_time": DAY}
    database = "Hotel"

    def run(self, hotel_name, check_in_time, check_out_time, room_count, adult_count, child_count):
        check_in, check_out = parse_time(check_in_time, D_FORMAT), parse_time(check_out_time, D_FORMAT)
        if adult_count > 2 and room_count == 1:
            raise ToolError("The number of adults exceeds the capacity of one room.")
        for order in self.db.values():
            if order["hotel_name"] != hotel_name:
                continue
            old_in = parse_time(order["check_in_time"], D_FORMAT)
            old_out = parse_time(order["check_out_time"], D_FORMAT)
            if old_in <= check_in < old_out or old_in < check_out <= old_out:
                raise ToolError("room not available")
        order_id = str(len(self.db) + 1)
        self.db[order_id] = {"hotel_name": hotel_name, "check_in_time": check_in_time,
                             "check_out_time": check_out_time, "room_count": room_count,
                             "adult_count": adult_count, "child_count": child_count}
        return order_id


@register
class AppointmentRegistration(Tool):
    inputs = {"patient_name": "str", "date": "str", "doctor_name": "str"}
    shapes = {"date": DAY}
    database = "Appointments"

    def run(self, patient_name, date, doctor_name):
        patient, doctor = patient_name.strip(), doctor_name.strip()
        if not patient or not doctor:
            raise ToolError("Patient name and doctor name should not be null")
        day = normalise_time(date, D_FORMAT)
        for record in self.db.values():
            if record["patient_name"] == patient and try_normalise(record["date"], D_FORMAT) == day:
                raise ToolError("already registered" if record["doctor_name"] == doctor
                                else "patient already registered that day")
        appointment_id = "".join(self.session.random.choice("0123456789") for _ in range(8))
        self.db[appointment_id] = {"patient_name": patient, "date": day, "doctor_name": doctor}
        return appointment_id

    def check(self, pred, gold):
        try:
            pi, gi = pred["input"], gold["input"]
            same = pi["patient_name"].strip() == gi["patient_name"].strip() and \
                pi["doctor_name"].strip() == gi["doctor_name"].strip() and \
                try_normalise(pi["date"], D_FORMAT) == try_normalise(gi["date"], D_FORMAT)
        except (KeyError, TypeError, AttributeError) as error:
            raise CheckCrash(repr(error)) from None
        if gold["output"] is None and pred["output"] is not None:
            return False
        return same and pred["exception"] == gold["exception"]


@register
class CancelRegistration(Tool):
    inputs = {"appointment_id": "str"}
    shapes = {"appointment_id": keys_of("Appointments")}
    database = "Appointments"

    def run(self, appointment_id):
        key = appointment_id.strip()
        if key not in self.db:
            raise ToolError(f"The appointment {key} does not exist")
        del self.db[key]
        return "success"

    def check(self, pred, gold):
        return _inputs_equal_under(pred, gold, "appointment_id", _strip) and _outputs_and_exceptions(pred, gold)


@register
class ModifyRegistration(Tool):
    inputs = {"appointment_id": "str", "new_appointment_date": "str", "new_appointment_doctor": "str"}
    optional = frozenset({"new_appointment_date", "new_appointment_doctor"})
    shapes = {"appointment_id": keys_of("Appointments"), "new_appointment_date": DAY}
    database = "Appointments"

    def input_record(self, kwargs):
        return {"appointment_id": kwargs["appointment_id"],
                "new_appointment_date": kwargs.get("new_appointment_date"),
                "new_appointment_doctor": kwargs.get("new_appointment_doctor")}

    def run(self, appointment_id, new_appointment_date=None, new_appointment_doctor=None):
        key = str(appointment_id).strip()
        if key not in self.db:
            raise ToolError(f"The appointment {key} does not exist")
        if new_appointment_doctor is not None and not new_appointment_doctor.strip():
            raise ToolError("The doctor name should not be null")
        if new_appointment_date is None and new_appointment_doctor is None:
            raise ToolError("Please provide the new appointment date or doctor")
        record, unchanged = self.db[key], []
        date = normalise_time(new_appointment_date, D_FORMAT) if new_appointment_date is not None else None
        doctor = new_appointment_doctor.strip() if new_appointment_doctor is not None else None
        if date is not None and date == record["date"]:
            unchanged.append("date")
        if doctor is not None and doctor == record["doctor_name"]:
            unchanged.append("doctor")
        if unchanged:
            raise ToolError("no modification" if len(unchanged) == 2 or (date is None or doctor is None)
                            else f"the {unchanged[0]} did not change")
        if date is not None:
            record["date"] = date
        if doctor is not None:
            record["doctor_name"] = doctor
        return "success"

    def check(self, pred, gold):
        try:
            pi, gi = pred["input"], gold["input"]

            def date(v):
                return None if v is None else try_normalise(v, D_FORMAT)

            def doctor(v):
                return None if v is None else str(v).strip()
            same = str(pi["appointment_id"]).strip() == str(gi["appointment_id"]).strip() and \
                date(pi["new_appointment_date"]) == date(gi["new_appointment_date"]) and \
                doctor(pi["new_appointment_doctor"]) == doctor(gi["new_appointment_doctor"])
        except (KeyError, TypeError) as error:
            raise CheckCrash(repr(error)) from None
        return same and _outputs_and_exceptions(pred, gold)


@register
class QueryRegistration(Tool):
    inputs = {"patient_name": "str", "date": "str"}
    shapes = {"date": DAY}
    database = "Appointments"

    def run(self, patient_name, date):
        day = normalise_time(date, D_FORMAT)
        found = {key: copy.deepcopy(record) for key, record in self.db.items()
                 if record["patient_name"] == patient_name and try_normalise(record["date"], D_FORMAT) == day}
        if not found:
            raise ToolError(f"No appointment for {patient_name} on {day}")
        return found

    def check(self, pred, gold):
        try:
            pi, gi = pred["input"], gold["input"]
            same = pi["patient_name"].strip() == gi["patient_name"].strip() and \
                try_normalise(pi["date"], D_FORMAT) == try_normalise(gi["date"], D_FORMAT)
        except (KeyError, TypeError, AttributeError) as error:
            raise CheckCrash(repr(error)) from None
        return same and _outputs_and_exceptions(pred, gold)


def _user_id(value) -> str:
    return str(value).strip().upper()


@register
class RecordHealthData(Tool):
    inputs = {"user_id": "str", "time": "str", "health_data": "list"}
    shapes = {"time": MOMENT}
    optional = frozenset({"health_data"})
    database = "HealthData"

    def input_record(self, kwargs):
        return {"user_id": kwargs["user_id"], "time": kwargs["time"], "health_data": kwargs.get("health_data")}

    def run(self, user_id, time, health_data=None):
        user = _user_id(user_id)
        if not user:
            raise ToolError("User ID should not be null")
        when = normalise_time(time, T_FORMAT)
        if not health_data:
            raise ToolError("Health data should not be null")
        names = []
        for item in health_data:  # a string (what the parser delivers) iterates over characters
            if not isinstance(item, dict) or "name" not in item:
                raise ToolError("Each health data item needs a name")
            names.append(item["name"])
        if len(set(names)) != len(names):
            raise ToolError("Duplicate health data names")
        values = {item["name"]: item.get("value") for item in health_data}
        records = self.db.setdefault(user, [])
        for record in records:
            if record["time"] == when:
                record.update(values)
                return "success"
        records.append({"time": when, **values})
        return "success"

    def check(self, pred, gold):
        try:
            same = _user_id(pred["input"]["user_id"]) == _user_id(gold["input"]["user_id"]) and \
                try_normalise(pred["input"]["time"], T_FORMAT) == try_normalise(gold["input"]["time"], T_FORMAT)
        except (KeyError, TypeError) as error:
            raise CheckCrash(repr(error)) from None
        return same and _outputs_and_exceptions(pred, gold)


@register
class QueryHealthData(Tool):
    inputs = {"user_id": "str", "start_time": "str", "end_time": "str"}
    shapes = {"user_id": keys_of("HealthData", "upper"), "start_time": MOMENT, "end_time": MOMENT}
    database = "HealthData"

    def run(self, user_id, start_time, end_time):
        user = _user_id(user_id)
        if not user:
            raise ToolError("User ID should not be null")
        errors, times = [], []
        for text in (start_time, end_time):
            try:
                times.append(normalise_time(text, T_FORMAT))
            except ToolError as error:
                errors.append(str(error))
        if errors:
            raise ToolError("; ".join(errors))
        start, end = times
        if start > end:
            raise ToolError("Start time should be earlier than end time")
        if user not in self.db:
            raise ToolError(f"User {user} not found")
        found = [copy.deepcopy(r) for r in self.db[user] if start <= try_normalise(r["time"], T_FORMAT) <= end]
        if not found:
            raise ToolError("No data in the time span")
        return found

    def check(self, pred, gold):
        try:
            pi, gi = pred["input"], gold["input"]
            same = _user_id(pi["user_id"]) == _user_id(gi["user_id"]) and all(
                try_normalise(pi[k], T_FORMAT) == try_normalise(gi[k], T_FORMAT) for k in ("start_time", "end_time"))
        except (KeyError, TypeError) as error:
            raise CheckCrash(repr(error)) from None
        return same and _outputs_and_exceptions(pred, gold)


# ============================================================================ lookups

def _symptom(value) -> str:
    return str(value).strip().lower()


class _SymptomTool(Tool):
    inputs = {"symptom": "str"}
    shapes = {"symptom": keys_of("Symptom", "lower")}
    database = "Symptom"
    fields: tuple[str, str] = ("name", "description")

    def run(self, symptom):
        key = _symptom(symptom)
        if not key:
            raise ToolError("Symptom should not be null")
        if key not in self.db:
            raise ToolError(f"Symptom {key} not found")
        return [{field: entry[field] for field in self.fields} for entry in self.db[key]]

    def check(self, pred, gold):
        return _inputs_equal_under(pred, gold, "symptom", _symptom) and _outputs_and_exceptions(pred, gold)


@register
class SymptomSearch(_SymptomTool):
    fields = ("name", "description")


@register
class EmergencyKnowledge(_SymptomTool):
    fields = ("name", "aid")


@register
class QueryStock(Tool):
    inputs = {"stock_code": "str", "date": "str"}
    shapes = {"stock_code": keys_of("Stock", "upper"), "date": DAY}
    database = "Stock"

    def run(self, stock_code, date):
        code = stock_code.strip().upper()
        day = normalise_time(date, D_FORMAT)
        if not code:
            raise ToolError("Stock code should not be null")
        if code not in self.db:
            raise ToolError(f"Stock {code} not found")
        if day not in self.db[code]:
            raise ToolError(f"No price of {code} on {day}")
        return self.db[code][day]

    def check(self, pred, gold):
        return _inputs_equal_under(pred, gold, "stock_code", lambda v: str(v).strip().upper()) and \
            _inputs_equal_under(pred, gold, "date", lambda v: try_normalise(v, D_FORMAT)) and \
            _outputs_and_exceptions(pred, gold)


def _month_day(value) -> str:
    text = str(value).strip()
    try:
        return datetime.strptime(text, D_FORMAT).strftime("%m-%d")
    except ValueError:
        return parse_time(text, "%m-%d").strftime("%m-%d")


@register
class QueryHistoryToday(Tool):
    inputs = {"date": "str"}
    shapes = {"date": history_days}
    database = "History"

    def run(self, date):
        key = _month_day(date)
        if key not in self.db:
            raise ToolError(f"No history on {key}")
        return [f"Title: {e['Title'].strip()}, Date: {e['Date'].strip()}, Description: {e['Description'].strip()}"
                for e in self.db[key]]

    def check(self, pred, gold):
        def normal(v):
            try:
                return _month_day(v)
            except ToolError as error:
                return str(error)
        return _inputs_equal_under(pred, gold, "date", normal) and _outputs_and_exceptions(pred, gold)


def _keyword(value) -> str:
    return str(value).replace("_", " ").strip().lower()


@register
class Wiki(Tool):
    inputs = {"keyword": "str"}
    shapes = {"keyword": keys_of("Wiki", "lower")}
    database = "Wiki"

    def run(self, keyword):
        key = _keyword(keyword)
        if key not in self.db:
            raise ToolError("keyword not found")
        return {"url": self.db[key]["url"], "summary": self.db[key]["summary"]}

    def check(self, pred, gold):
        return _same(pred, gold, "api_name") and _outputs_and_exceptions(pred, gold)


@register
class DocumentQA(Tool):
    inputs = {"url": "str", "question": "str"}
    shapes = {"url": keys_of("QuestionAnswering"), "question": {"pattern": "[^ ]"}}
    database = "QuestionAnswering"
    TOO_HARD = "The question is too difficult to answer."

    def run(self, url, question):
        url, question = url.strip(), question.strip()
        if not question:
            raise ToolError("Question should not be null")
        if url not in self.db:
            raise ToolError(f"The url {url} is not found")
        # upstream looks the question up as a key of a list of {question, answer}: it never matches
        return self.TOO_HARD

    def check(self, pred, gold):
        return _inputs_equal_under(pred, gold, "url", _strip) and \
            _inputs_equal_under(pred, gold, "question", _strip) and _outputs_and_exceptions(pred, gold)


@register
class ImageCaption(Tool):
    inputs = {"url": "str"}
    shapes = {"url": {"pattern": r"^[^ ]*\.(jpg|jpeg|png)$"}}  # its 12k urls are not listed
    database = "ImageCaptioning"

    def run(self, url):
        url = url.strip()
        if not url.endswith((".jpg", ".jpeg", ".png")):
            raise ToolError("The url should end with .jpg, .jpeg or .png")
        for entry in self.db:
            if entry["url"] == url:
                return entry["caption"]
        raise ToolError(f"The url {url} is not found")


@register
class SpeechRecognition(Tool):
    inputs = {"url": "str"}
    shapes = {"url": keys_of("SpeechRecognition")}
    database = "SpeechRecognition"

    def run(self, url):
        url = url.strip()
        if not url.endswith(".wav"):
            raise ToolError("The url should end with .wav")
        if url not in self.db:
            raise ToolError(f"The url {url} is not found")
        return self.db[url]


# ============================================================================ other tools

@register
class PlayMusic(Tool):
    inputs = {"music_name": "str"}

    def run(self, music_name):
        if not music_name.strip():
            raise ToolError("Music name should not be null")
        return "music://" + music_name.strip().lower()

    def check(self, pred, gold):
        return pred["output"] == gold["output"]


_EMAIL = re.compile(r"^[a-z0-9]+[._]?[a-z0-9]+@\w+\.\w{2,3}$")


@register
class SendEmail(Tool):
    inputs = {"receiver": "str", "subject": "str", "content": "str"}
    shapes = {"receiver": {"pattern": "^[a-z0-9]+[._]?[a-z0-9]+@[a-zA-Z0-9_]+\\.[a-zA-Z0-9_]{2,3}$"},
              "subject": {"pattern": "[^ ]"}, "content": {"pattern": "[^ ]"}}

    def run(self, receiver, subject, content):
        receiver, subject, content = receiver.strip(), subject.strip(), content.strip()
        if not _EMAIL.match(receiver):
            raise ToolError("The receiver's email address is invalid")
        if not subject or not content:
            raise ToolError("Subject and content should not be null")
        return "success"

    def check(self, pred, gold):
        try:
            pi, gi = pred["input"], gold["input"]
            same = str(pi["receiver"]).strip().lower() == str(gi["receiver"]).strip().lower() and all(
                str(pi[k]).strip() == str(gi[k]).strip() for k in ("subject", "content"))
        except (KeyError, TypeError) as error:
            raise CheckCrash(repr(error)) from None
        return same and _outputs_and_exceptions(pred, gold)


def calculate(formula: str) -> float:
    """Upstream's calculator, from the spec: innermost-first parentheses by "first ( to first )", then * and /
    left to right, then + and - left to right, on floats. Errors are raised as ToolError."""
    text = formula.replace(" ", "")
    if not text or any(c not in "0123456789+-*/()" for c in text):
        raise ToolError("invalid character in formula")
    if text.count("(") != text.count(")"):
        raise ToolError("unbalanced parentheses")
    operators = sum(text.count(op) for op in "+-*/")
    if operators == 0 or operators + 1 == len(text):
        raise ToolError("invalid formula")
    if len(text) > 1000:
        raise ToolError("formula too long")
    try:
        while "(" in text:
            start, end = text.index("("), text.index(")")
            if end < start:
                raise ToolError("invalid parentheses")
            value = _flat(text[start + 1:end])
            text = text[:start] + _number(value) + text[end + 1:]
        return _flat(text)
    except (ValueError, IndexError) as error:
        raise ToolError(str(error)) from None
    except ZeroDivisionError as error:
        raise ToolError(str(error)) from None


def _number(value: float) -> str:
    return repr(value)


def _flat(text: str) -> float:
    """Evaluate a formula without parentheses: * and / first, left to right, then + and -."""
    tokens = re.findall(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?|[+\-*/]", text)
    if "".join(tokens) != text:
        raise ValueError(f"could not read {text!r}")
    items: list = []
    for token in tokens:  # a leading or doubled sign makes the next number negative
        if token in "+-*/" and (not items or items[-1] in ("+", "-", "*", "/")):
            if token == "-":
                items.append("neg")
                continue
            raise ValueError(f"misplaced operator in {text!r}")
        if items and items[-1] == "neg":
            items[-1] = -float(token)
        else:
            items.append(token if token in "+-*/" else float(token))
    if not items or isinstance(items[-1], str):
        raise ValueError(f"incomplete formula {text!r}")
    stack = [items[0]]
    for op, value in zip(items[1::2], items[2::2]):
        if op == "*":
            stack[-1] = stack[-1] * value
        elif op == "/":
            stack[-1] = stack[-1] / value
        else:
            stack.extend([op, value])
    result = stack[0]
    for op, value in zip(stack[1::2], stack[2::2]):
        result = result + value if op == "+" else result - value
    return float(result)


@register
class Calculator(Tool):
    inputs = {"formula": "str"}
    shapes = {"formula": {"pattern": r"^[0-9+*/() -]*[+*/-][0-9+*/() -]*$"}}

    def run(self, formula):
        return calculate(formula)

    def check(self, pred, gold):
        return _inputs_equal_under(pred, gold, "formula", lambda v: str(v).replace(" ", "")) and \
            _outputs_and_exceptions(pred, gold)


@register
class GetToday(Tool):
    inputs: dict[str, str] = {}

    def input_record(self, kwargs):
        return None

    def run(self):
        return "2023-03-31"

    def check(self, pred, gold):
        return pred["output"] is not None and pred["exception"] is None and pred["input"] is None


# ============================================================================ smart home

def _device_list(devices):
    """Normalised devices (names lower-cased, stripped, unique; descriptions stripped; sorted by name)."""
    if not isinstance(devices, list):
        raise ToolError("Devices should be a list")
    out, seen = [], set()
    for device in devices:
        if not isinstance(device, dict) or "name" not in device or "description" not in device:
            raise ToolError("Each device needs a name and a description")
        name = str(device["name"]).strip().lower()
        if name in seen:
            raise ToolError(f"Duplicate device {name}")
        seen.add(name)
        out.append({"name": name, "description": str(device["description"]).strip()})
    return sorted(out, key=lambda d: d["name"])


def _scene(value) -> str:
    return str(value).strip().lower()


class _SceneTool(Tool):
    database = "Scenes"

    def _existing(self, name):
        key = _scene(name)
        if not key:
            raise ToolError("Scene name should not be null")
        if key not in self.db:
            raise ToolError(f"Scene {key} not found")
        return key


@register
class AddScene(_SceneTool):
    inputs = {"name": "str", "devices": "list"}

    def run(self, name, devices):
        key = _scene(name)
        if not key:
            raise ToolError("Scene name should not be null")
        if key in self.db:
            raise ToolError(f"Scene {key} already exists")
        self.db[key] = _device_list(devices)
        return "success"

    def check(self, pred, gold):
        if not self._same_scene(pred, gold) or pred["exception"] != gold["exception"]:
            return False
        return not (gold["output"] is None and pred["output"] is not None)

    @staticmethod
    def _same_scene(pred, gold):
        def devices(v):
            try:
                return _device_list(v)
            except ToolError as error:
                return str(error)
        try:
            return _scene(pred["input"]["name"]) == _scene(gold["input"]["name"]) and \
                devices(pred["input"]["devices"]) == devices(gold["input"]["devices"])
        except (KeyError, TypeError) as error:
            raise CheckCrash(repr(error)) from None


@register
class ModifyScene(_SceneTool):
    inputs = {"name": "str", "devices": "list"}
    shapes = {"name": keys_of("Scenes", "lower")}

    def run(self, name, devices):
        self.db[self._existing(name)] = _device_list(devices)
        return "success"

    def check(self, pred, gold):
        return AddScene._same_scene(pred, gold) and _outputs_and_exceptions(pred, gold)


@register
class DeleteScene(_SceneTool):
    inputs = {"name": "str"}
    shapes = {"name": keys_of("Scenes", "lower")}

    def run(self, name):
        del self.db[self._existing(name)]
        return "success"

    def check(self, pred, gold):
        return _inputs_equal_under(pred, gold, "name", _scene) and _outputs_and_exceptions(pred, gold)


@register
class QueryScene(_SceneTool):
    inputs = {"name": "str"}
    shapes = {"name": keys_of("Scenes", "lower")}

    def run(self, name):
        return copy.deepcopy(self.db[self._existing(name)])

    def check(self, pred, gold):
        return _inputs_equal_under(pred, gold, "name", _scene) and _outputs_and_exceptions(pred, gold)


class _SwitchTool(Tool):
    database = "TimeSwitch"

    def check(self, pred, gold):
        same = _inputs_equal_under(pred, gold, "name", _scene) and \
            _inputs_equal_under(pred, gold, "time", lambda v: try_normalise(v, T_FORMAT))
        if "on" in self.inputs:
            same = same and _inputs_equal_under(pred, gold, "on", lambda v: v)
        return same and _outputs_and_exceptions(pred, gold)


@register
class TimedSwitch(_SwitchTool):
    inputs = {"name": "str", "time": "str", "on": "bool"}
    shapes = {"time": MOMENT}

    def run(self, name, time, on):
        key = _scene(name)
        if not key:
            raise ToolError("Device name should not be null")
        when = normalise_time(time, T_FORMAT)
        entries = self.db.setdefault(key, [])
        for entry in entries:
            if entry["time"] == when:
                entry["on"] = on
                return "success"
        entries.append({"time": when, "on": on})
        return "success"


@register
class CancelTimedSwitch(_SwitchTool):
    inputs = {"name": "str", "time": "str"}
    shapes = {"name": keys_of("TimeSwitch", "lower"), "time": MOMENT}

    def run(self, name, time):
        key = _scene(name)
        if not key:
            raise ToolError("Device name should not be null")
        when = normalise_time(time, T_FORMAT)
        if key not in self.db:
            raise ToolError(f"Device {key} not found")
        for index, entry in enumerate(self.db[key]):
            if entry["time"] == when:
                del self.db[key][index]
                return "success"
        raise ToolError(f"No switch of {key} at {when}")


# ============================================================================ unavailable offline

class _NetworkTool(Tool):
    """An API that needs the network or a model this machine does not have: ``ToolSession.execute`` reports it
    as unavailable before looking at the arguments, and so does ``run`` for a direct caller."""
    needs_network = True

    def run(self, **kwargs):
        raise Unavailable(self.name)


@register
class Dictionary(_NetworkTool):
    inputs = {"keyword": "str"}


@register
class Translate(_NetworkTool):
    inputs = {"src": "str", "src_lang": "str", "tgt_lang": "str"}
    optional = frozenset({"src_lang", "tgt_lang"})


@register
class ToolSearcher(_NetworkTool):
    """Needs the sentence-transformers retrieval model (not on this machine)."""
    inputs = {"keywords": "str"}


@register
class SearchEngine(_NetworkTool):
    """Needs NLTK's tokenizer data for the query (a download): unavailable offline."""
    inputs = {"keyword": "str"}

"""Constrained sampling (issue 57): the simulator writes only text of its domain's declared shape
(:meth:`genenv.domains.base.Domain.task_shape`: a JSON schema or a regex), and its updates score the tokens under the
same constrained distribution. Three mechanisms, a module each, composed by :class:`TokenConstraint`
(:mod:`genenv.constrained.constraint`):

- :mod:`genenv.constrained.grammar`: the shape's grammar (llguidance), bitmasks, and what ``genenv check-domain``
  reads (:func:`grammar_problem`, :func:`shape_unbounded_places`);
- :mod:`genenv.constrained.references`: what the grammar cannot say, no repeated key or ``uniqueItems`` string, and
  ``x-member-of`` / ``x-type-of`` references to strings written earlier (a scan of the bytes so far);
- :mod:`genenv.constrained.closing`: under the budget a text closes before it is cut off.

The grammar constrains the *form* only: a task in the shape that the domain rejects (a gold call that fails, an
unreachable goal) is still invalid with its reason. Importing this package loads nothing heavy: llguidance loads with
the names that need it (a domain's schema keywords come from :mod:`genenv.constrained.references` alone).
"""

from __future__ import annotations

import importlib

_WHERE = {"TokenConstraint": "constraint", "Matcher": "constraint", "grammar_problem": "grammar",
          "shape_unbounded_places": "grammar", "unbounded_places": "grammar", "unpack_bitmask": "grammar",
          "shape_grammar": "grammar", "llguidance_tokenizer": "grammar", "byte_tokenizer": "grammar",
          "JSON_AS_WRITTEN": "grammar", "Closing": "closing"}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f"genenv.constrained.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'genenv.constrained' has no attribute {name!r}")

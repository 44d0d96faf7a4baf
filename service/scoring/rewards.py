"""Per-sample reward checks that need no model, and the arithmetic that combines rewards
(docs/methods.md K). Pure: no I/O, no engine.

- :func:`string_check`: OpenAI's ``string_check`` operations (``eq``, ``ne``, ``like``,
  ``ilike``) plus ``contains`` (= ``like``) and ``regex``; a pattern runs under a time bound.
- :func:`choice_check`: the gold letter (or option text) against the letter a response ends on.
- :class:`Formula`: an arithmetic expression over named components, parsed into an AST whose
  every node is on an allow-list, so it cannot reach an attribute, a name outside the
  components, or a call outside ``FUNCTIONS``.
- :func:`rubric_reward`: the aggregations of a weighted rubric's per-criterion P(yes).
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import regex

from service.scoring.answers import extract_answer
from service.scoring.audit import ANSWER_RE

StringOperation = Literal["eq", "ne", "like", "contains", "ilike", "regex"]
RubricAggregation = Literal["weighted", "all_required", "min"]

# A pattern is run under this bound, at admission on the item's own text (over it: a 422) and
# again when the reward is computed (over it: the item fails); the regex module checks the
# clock inside its matcher, so a catastrophic pattern stops there instead of hanging the loop.
REGEX_TIMEOUT_S: Final = 0.05
MAX_FORMULA_CHARS: Final = 500
PASS: Final = 0.5  # a criterion holds when P(yes) >= PASS


class PatternTooSlow(ValueError):
    """A regex ran over REGEX_TIMEOUT_S on its text."""


def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """``pattern`` compiled; a ``ValueError`` naming the problem when it is invalid."""
    try:
        return regex.compile(pattern)
    except regex.error as exc:
        raise ValueError(f"invalid regular expression: {exc}") from exc


def pattern_search(pattern: str, text: str, timeout_s: float = REGEX_TIMEOUT_S) -> bool:
    """Whether ``pattern`` matches anywhere in ``text``; ``PatternTooSlow`` past ``timeout_s``."""
    try:
        return compile_pattern(pattern).search(text, timeout=timeout_s) is not None
    except TimeoutError as exc:
        raise PatternTooSlow(
            f"the pattern ran over {timeout_s * 1000:.0f} ms on this text (catastrophic "
            "backtracking, e.g. nested quantifiers such as (a+)+); simplify it"
        ) from exc


def string_check(operation: StringOperation, text: str, reference: str) -> bool:
    """OpenAI's ``string_check``: ``eq``/``ne`` exact, ``like``/``contains`` the reference is a
    substring, ``ilike`` a substring ignoring case; ``regex`` the reference is a pattern that
    must match somewhere in the text.

    Example:
        >>> string_check("ilike", "The answer is PARIS.", "paris")
        True
    """
    if operation == "eq":
        return text == reference
    if operation == "ne":
        return text != reference
    if operation in ("like", "contains"):
        return reference in text
    if operation == "ilike":
        return reference.casefold() in text.casefold()
    return pattern_search(reference, text)


def string_input(response: str, source: Literal["response", "answer"]) -> str:
    """What a string check reads: the whole response (stripped), or its final answer as the
    rule verifier extracts it ('' when it states none)."""
    if source == "response":
        return response.strip()
    return extract_answer(response) or ""


# --- choice ---------------------------------------------------------------------------------

LETTERS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_ONLY_LETTER = re.compile(r"^\s*\(?([A-Z])\)?[.:]?\s*$", re.IGNORECASE)
_BOXED_LETTER = re.compile(r"\\boxed\{\s*\(?([A-Z])\)?\s*\}", re.IGNORECASE)
_ANSWER_IS = re.compile(
    r"\banswer\s+is\s*:?\s*\(?([A-Z])\)?(?![A-Za-z])", re.IGNORECASE | re.MULTILINE
)


def response_letter(response: str) -> str | None:
    """The letter a response ends on: its last ``ANSWER: X`` line, else its last ``\\boxed{X}``,
    else a response that is only a letter, else its last "answer is (X)"; upper case, None
    when it names none.

    Example:
        >>> response_letter("B looks wrong.\\nANSWER: c")
        'C'
    """
    found = ANSWER_RE.findall(response)
    if found:
        return str(found[-1]).upper()
    found = _BOXED_LETTER.findall(response)
    if found:
        return str(found[-1]).upper()
    if m := _ONLY_LETTER.match(response):
        return m.group(1).upper()
    found = _ANSWER_IS.findall(response)
    return str(found[-1]).upper() if found else None


def _fold(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def gold_letter(answer: str, options: Sequence[str] | None) -> str | None:
    """The gold answer as a letter: a single letter as given (within the options, when sent),
    else the option whose text it is (case, spacing and punctuation folded); None when it is
    text that no option matches."""
    bare = answer.strip().strip("().:").strip()
    if len(bare) == 1 and bare.upper() in LETTERS:
        letter = bare.upper()
        if options is None or LETTERS.index(letter) < len(options):
            return letter
    for i, option in enumerate(options or ()):
        if _fold(option) == _fold(answer):
            return LETTERS[i]
    return None


@dataclass(frozen=True, slots=True)
class ChoiceCheck:
    """What a choice check read: the response's letter (or its final answer text) and whether
    it is the gold one."""

    extracted: str | None
    correct: bool


def choice_check(response: str, answer: str, options: Sequence[str] | None) -> ChoiceCheck:
    """The response's pick against the gold ``answer`` (a letter, or an option's text).

    With a gold letter the response's letter decides; with gold text and no options, the
    response's final answer text is compared with it, folded.
    """
    gold = gold_letter(answer, options)
    if gold is not None:
        letter = response_letter(response)
        return ChoiceCheck(letter, letter == gold)
    text = extract_answer(response)
    return ChoiceCheck(text, text is not None and _fold(text) == _fold(answer))


# --- the formula ----------------------------------------------------------------------------


def _clip(x: float, lo: float, hi: float) -> float:
    return min(max(x, lo), hi)


FUNCTIONS: Final[Mapping[str, tuple[Callable[..., float], int | None]]] = {
    # name -> (function, arity; None = one or more)
    "min": (min, None),
    "max": (max, None),
    "abs": (abs, 1),
    "clip": (_clip, 3),
    "floor": (lambda x: float(math.floor(x)), 1),
    "ceil": (lambda x: float(math.ceil(x)), 1),
    "exp": (math.exp, 1),
    "sqrt": (math.sqrt, 1),
    "log": (math.log, 1),
}
_BINARY: Final[Mapping[type[ast.operator], Callable[[float, float], float]]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.BitXor: operator.pow,  # "^" is a power, as in OpenAI's multi grader
}
_UNARY: Final[Mapping[type[ast.unaryop], Callable[[float], float]]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


class FormulaError(ValueError):
    """A formula that cannot be parsed, names an unknown component, or uses a form outside
    the allow-list; the message says which."""


@dataclass(frozen=True)
class Formula:
    """An arithmetic expression over component names, checked once and evaluated in floats.

    Allowed: numbers, component names, ``+ - * / ** ^`` (``^`` is a power), unary ``-``/``+``,
    parentheses, and calls of ``min max abs clip floor ceil exp sqrt log`` by name with
    positional arguments. Anything else (attributes, subscripts, comparisons, keywords,
    lambdas, strings) is a :class:`FormulaError`, raised before anything is evaluated.

    Example:
        >>> Formula.parse("0.8 * correct + 0.2 * clip(fmt, 0, 1)", {"correct", "fmt"}).evaluate(
        ...     {"correct": 1.0, "fmt": 2.0})
        1.0
    """

    text: str
    tree: ast.expr
    names: frozenset[str]

    @classmethod
    def parse(cls, text: str, components: set[str] | frozenset[str]) -> Formula:
        if len(text) > MAX_FORMULA_CHARS:
            raise FormulaError(f"has {len(text)} characters, over {MAX_FORMULA_CHARS}")
        try:
            tree = ast.parse(text.strip(), mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            raise FormulaError(f"cannot be parsed: {exc}") from exc
        names: set[str] = set()
        _check(tree, frozenset(components), names)
        return cls(text, tree, frozenset(names))

    def evaluate(self, values: Mapping[str, float]) -> float:
        """The formula's value; ``ArithmeticError`` or ``ValueError`` for a division by zero,
        an overflow or a domain error (the log of 0), or a value that is not finite."""
        out = _eval(self.tree, values)
        if not math.isfinite(out):
            raise ValueError(f"the formula's value is {out}")
        return out


def _check(node: ast.expr, components: frozenset[str], names: set[str]) -> None:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise FormulaError(f"holds the constant {node.value!r}; only numbers are allowed")
    elif isinstance(node, ast.Name):
        if node.id not in components:
            known = ", ".join(sorted(components)) or "none"
            raise FormulaError(f"names {node.id!r}, which is not a component (components: {known})")
        names.add(node.id)
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        _check(node.left, components, names)
        _check(node.right, components, names)
    elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        _check(node.operand, components, names)
    elif isinstance(node, ast.Call):
        _check_call(node, components, names)
    else:
        raise FormulaError(
            f"uses {ast.unparse(node)!r} ({type(node).__name__}); allowed are numbers, component "
            "names, + - * / ** ^, parentheses and calls of " + ", ".join(FUNCTIONS)
        )


def _check_call(node: ast.Call, components: frozenset[str], names: set[str]) -> None:
    if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
        raise FormulaError(
            f"calls {ast.unparse(node.func)!r}; the functions allowed are " + ", ".join(FUNCTIONS)
        )
    if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
        raise FormulaError(f"calls {node.func.id} with keywords or *args; pass values by position")
    arity = FUNCTIONS[node.func.id][1]
    n = len(node.args)
    if (arity is None and n < 1) or (arity is not None and n != arity):
        raise FormulaError(
            f"calls {node.func.id} with {n} arguments; it takes "
            + ("one or more" if arity is None else str(arity))
        )
    for arg in node.args:
        _check(arg, components, names)


def _eval(node: ast.expr, values: Mapping[str, float]) -> float:
    # Only the node types _check admitted reach here.
    if isinstance(node, ast.Constant):
        assert isinstance(node.value, int | float)
        return float(node.value)
    if isinstance(node, ast.Name):
        return float(values[node.id])
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, values), _eval(node.right, values)
        return _real(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_eval(node.operand, values))
    assert isinstance(node, ast.Call)
    assert isinstance(node.func, ast.Name)
    fn = FUNCTIONS[node.func.id][0]
    return _real(fn(*(_eval(a, values) for a in node.args)))


def _real(value: object) -> float:
    if isinstance(value, complex):  # a negative number to a fractional power
        raise ValueError("the formula's value is complex")
    assert isinstance(value, int | float)
    return float(value)


def weighted_sum(values: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """Σ w·v over the components, divided by the sum of the positive weights (so components in
    [0, 1] with positive weights give a reward in [0, 1]; a negative weight subtracts)."""
    positive = sum(w for w in weights.values() if w > 0)
    if positive <= 0:
        raise ValueError("no component has a positive weight")
    return sum(weights[name] * values[name] for name in weights) / positive


# --- rubrics --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Criterion:
    """One rubric criterion: its weight (negative: a fault that costs reward when present) and
    whether the reward is 0 when it does not hold."""

    weight: float
    required: bool = False


def holds(criterion: Criterion, p_yes: float) -> bool:
    """A positive criterion holds when P(yes) >= PASS; a penalty (weight < 0) "holds" when the
    fault is absent (P(yes) < PASS)."""
    return p_yes >= PASS if criterion.weight >= 0 else p_yes < PASS


def rubric_reward(
    criteria: Sequence[Criterion], p_yes: Sequence[float], aggregation: RubricAggregation
) -> float:
    """A rubric's reward from each criterion's P(yes).

    - ``weighted``: Σ w·p over the criteria, divided by the sum of the positive weights, then
      clipped to [0, 1]; 0 when a ``required`` criterion does not hold.
    - ``all_required``: 1 when every required criterion holds (every criterion, when none is
      marked), else 0.
    - ``min``: the least satisfied criterion: min of p over positive criteria and of 1 - p over
      penalties; 0 when a required criterion does not hold.
    """
    if len(criteria) != len(p_yes) or not criteria:
        raise ValueError("one probability per criterion, at least one criterion")
    pairs = list(zip(criteria, p_yes, strict=True))
    gate = [i for i, c in enumerate(criteria) if c.required]
    if not gate and aggregation == "all_required":
        gate = list(range(len(criteria)))
    gated = all(holds(*pairs[i]) for i in gate)
    if aggregation == "all_required":
        return 1.0 if gated else 0.0
    if not gated:
        return 0.0
    if aggregation == "min":
        return min(p if c.weight >= 0 else 1.0 - p for c, p in pairs)
    positive = sum(c.weight for c in criteria if c.weight > 0)
    return _clip(sum(c.weight * p for c, p in pairs) / positive, 0.0, 1.0)

"""A labelled decision (``POST /v1/calibrations``, target ``decisions``): the input and
questions a /v1/decisions request sends, with the correct value of each question."""

from __future__ import annotations

from pydantic import Field, model_validator

from service.protocol.base import JudgeMode, ServiceModel
from service.protocol.decisions import (
    ChoiceQuestion,
    DecisionRequest,
    InputItem,
    PredicateQuestion,
    Question,
    ScoreQuestion,
    check_input,
    check_questions,
)

Label = bool | int | str | None


class DecisionExample(ServiceModel):
    """One labelled decision: the input and questions a /v1/decisions request sends, and the
    correct value of each question (``null``: not labelled, read but not fitted)."""

    input: str | list[InputItem]
    questions: list[Question]
    answers: list[Label] = Field(
        description="One per question: a predicate's true or false; a choice's value (typed, as "
        "in `choices`); a score's level label or its index."
    )

    @model_validator(mode="after")
    def _check(self) -> DecisionExample:
        check_input(self.input)
        check_questions(self.questions)
        if len(self.answers) != len(self.questions):
            raise ValueError(
                f"{len(self.answers)} answers for {len(self.questions)} questions: give one per "
                "question (null for a question left unlabelled)"
            )
        for i, q in enumerate(self.questions):
            label_index(q, self.answers[i], f"answers[{i}]")
        return self

    def labelled(self) -> list[tuple[int, str, int]]:
        """``(question index, question type, index of the correct label)`` per labelled
        question."""
        out: list[tuple[int, str, int]] = []
        for i, (q, a) in enumerate(zip(self.questions, self.answers, strict=True)):
            index = label_index(q, a, f"answers[{i}]")
            if index is not None:
                out.append((i, q.type, index))
        return out

    def request(self, mode: JudgeMode, reasoning_tokens: int, model: str) -> DecisionRequest:
        """The /v1/decisions request a fit reads: one order of the choices, no debiasing."""
        return DecisionRequest.model_validate(
            {
                "input": self.input,
                "questions": self.questions,
                "model": model,
                "mode": mode,
                "reasoning_tokens": reasoning_tokens,
            }
        )


def label_index(q: Question, label: Label, where: str) -> int | None:
    """The index of ``label`` among ``q``'s labels as read (a predicate: 0 true, 1 false);
    None for ``null``. ValueError naming ``where`` for a label ``q`` cannot have."""
    if label is None:
        return None
    if isinstance(q, PredicateQuestion):
        if not isinstance(label, bool):
            raise ValueError(f"{where} is {label!r}: a predicate is labelled true or false")
        return 0 if label else 1
    if isinstance(q, ChoiceQuestion):
        return _choice_index(q, label, where)
    assert isinstance(q, ScoreQuestion)
    return _level_index(q, label, where)


def _choice_index(q: ChoiceQuestion, label: bool | int | str, where: str) -> int:
    for j, c in enumerate(q.choices):
        if type(c.value) is type(label) and c.value == label:
            return j
    raise ValueError(
        f'{where} is {label!r}, not one of the question\'s choice values (typed: "true" and '
        "true differ)"
    )


def _level_index(q: ScoreQuestion, label: bool | int | str, where: str) -> int:
    if isinstance(label, bool):
        raise ValueError(f"{where} is {label!r}: a score is labelled by a level label or index")
    if isinstance(label, int):
        if not 0 <= label < len(q.levels):
            raise ValueError(f"{where} is {label}: a level index is 0 to {len(q.levels) - 1}")
        return label
    for j, level in enumerate(q.levels):
        if level.label == label:
            return j
    raise ValueError(f"{where} is {label!r}, not one of the question's level labels")

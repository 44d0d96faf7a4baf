"""Text -> tokens without a tokenizer, and the fixed token overheads of the prompts we build.

Example:
    >>> estimate_text_tokens("12 + 30 = 42")
    10
"""

from __future__ import annotations

import math
import string
from typing import Final

# --- text -> tokens without a tokenizer ------------------------------------------------------
#
# Why not plain bytes/3: the default model (SmolLM2, Llama-style byte-level BPE) encodes every
# digit as its own token, and math text is dense in digits and symbols. Measured on the 7,914
# questions and solutions of gsm8k/example_model_solutions.jsonl it averages 2.5 bytes/token,
# so bytes/3 under-counts 80% of them. Counting by character class instead:
#   ASCII digit            1 token  (always a token of its own)
#   ASCII punctuation      1 token  (merges such as "..." only make the real count smaller)
#   non-ASCII              1 token per 2 UTF-8 bytes (CJK is about 1.5 tokens a character)
#   ASCII letters, spaces  1 token per 3 bytes (English words are about 4-5 bytes a token)
# On that data set the estimate is 1.21x the real count overall (0.91x .. 1.86x per text);
# the fixed overheads below absorb the few texts a little under. Adversarial text (random
# mixed-case letters) can still exceed it: only the byte count bounds byte-level BPE, and the
# `actual` usage recorded after the run settles the difference.
DIGIT_TOKENS_PER_CHAR: Final = 1
PUNCT_TOKENS_PER_CHAR: Final = 1
NON_ASCII_BYTES_PER_TOKEN: Final = 2
ASCII_TEXT_BYTES_PER_TOKEN: Final = 3

_DIGITS: Final = string.digits.encode()
_PUNCT: Final = string.punctuation.encode()

# --- fixed prompt overheads (system text, instructions, fences, chat template) -----------------
#
# Measured upper bounds for the default model's chat template (rendered with empty texts), with
# a little headroom. Operators running another template rely on the `actual` tokens recorded
# after the run; these only size the up-front estimate.
OUTCOME_OVERHEAD: Final = 160  # measured 148 direct, 157 reasoning (incl. "\nVerdict: ")
PROCESS_OVERHEAD: Final = 160  # without step blocks; measured 134 direct, 148 reasoning
PROCESS_STEP_OVERHEAD: Final = 16  # "<step k>\n...\n</step k>" per step; measured <= 15
SINGLE_PASS_OVERHEAD: Final = 150  # system + question fence; measured 112
MCQ_OVERHEAD: Final = 80  # system, "Question: ", task line, "Answer:"; measured 70
MCQ_OPTION_OVERHEAD: Final = 4  # "A. " and the newline; measured 4
POPULARITY_OVERHEAD: Final = 4  # "Answer:" before an option text; measured 2
CONTENT_FREE_INPUTS: Final = 3  # contextual calibration's content-free prompts
AUDIT_OVERHEAD: Final = 130  # system, C.2 instruction, "ANSWER:"; measured <= 107
TAG_OVERHEAD: Final = 150  # tagger system, trace tags, one label question, "Label: "; measured 128
PREDICT_OVERHEAD: Final = 170  # predictability judge: system, trace fence, task; measured <= 151
INFER_OVERHEAD: Final = 150  # inferred question: system, choices, trace fence, task, "Question:"
RECALL_OVERHEAD: Final = 70  # open recall: system, question line, task, "Answer:"
MATCH_OVERHEAD: Final = 110  # question match: system, two question lines, task, "Label: "
SINGLE_PASS_STEP_OVERHEAD: Final = 40  # user turn + step fence + "Verdict: 1"; measured <= 30
SPLIT_OVERHEAD: Final = 100  # copy instructions + response fence; measured 92
# /classify and /pooling chats: the template's role markers per message (the default model's
# default system text counted once in the first); measured 5 per turn, 36 for the first.
POOLING_CHAT_OVERHEAD: Final = 40
DECISION_OVERHEAD: Final = 70  # system, input fence, chat template, "Answer:"; measured 58
DECISION_ITEM_OVERHEAD: Final = 8  # an input item's "[role]" header and blank line; measured 5
DECISION_QUESTION_OVERHEAD: Final = 40  # "Question:", task lines; measured <= 36
# /v1/judge/compare: system, question fence, task, chat template, "Answer:"; per response shown
# its lettered fence and blank line.
COMPARE_OVERHEAD: Final = 130  # measured 106 direct, 122 with reasoning_tokens
COMPARE_RESPONSE_OVERHEAD: Final = 14  # measured 12 (2 to 26 responses)
DECISION_OPTION_OVERHEAD: Final = 8  # "A. ", newline, " (...)" of a description; measured <= 7
# With a reference: the longer system text, the reference fence (and a criteria fence and
# note), on top of the text's own tokens.
REFERENCE_OVERHEAD: Final = 100  # measured 61, 86 with criteria (outcome and process)
# The copy call's max_tokens (serving/process.py): the copy, its markers and an echoed fence.
SPLIT_COPY_RATIO: Final = 1.25
SPLIT_COPY_EXTRA: Final = 64


def split_copy_tokens(response_tokens: int) -> int:
    """max_tokens of the model split's copy of a response of ``response_tokens`` tokens."""
    return int(response_tokens * SPLIT_COPY_RATIO) + SPLIT_COPY_EXTRA


def estimate_text_tokens(text: str) -> int:
    """Upper-ish token count of `text` for the default model (see the ratios above).

    Monotone: appending text never lowers the estimate.

    Example:
        >>> estimate_text_tokens("12 + 30 = 42")
        10
    """
    ascii_bytes = text.encode("ascii", "ignore")
    non_ascii = len(text.encode()) - len(ascii_bytes)
    no_digits = ascii_bytes.translate(None, _DIGITS)
    plain = no_digits.translate(None, _PUNCT)
    digits = len(ascii_bytes) - len(no_digits)
    punct = len(no_digits) - len(plain)
    return (
        digits * DIGIT_TOKENS_PER_CHAR
        + punct * PUNCT_TOKENS_PER_CHAR
        + math.ceil(non_ascii / NON_ASCII_BYTES_PER_TOKEN)
        + math.ceil(len(plain) / ASCII_TEXT_BYTES_PER_TOKEN)
    )

"""Which of our two languages a text is written in, cheaply: Chinese when its CJK characters
outnumber its Latin words ("用户使用PostgreSQL 15" is Chinese, "I love 火锅" is English). Used to
tell a memory in the other language than the question, where only a model that holds across
languages can find it (retrieval.fuse). One linear pass over the text."""

from __future__ import annotations

import re

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[A-Za-z]+")


def is_chinese(text: str) -> bool:
    return len(_CJK.findall(text)) > len(_WORD.findall(text))

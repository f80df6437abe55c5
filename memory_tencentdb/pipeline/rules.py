"""Rule-based L1 extraction: what the product remembers when no LLM is configured.

Only clear first-person statements and standing instructions are taken, in English and Chinese:

- rules for the assistant ("Always answer in English", "以后回答都用中文", "不要用表情符号"),
- constraints and decisions ("The project database must be PostgreSQL", "项目数据库必须用 PostgreSQL"),
- preferences and habits ("I prefer dark mode", "I go running every morning", "我每天早上喝咖啡"),
- stated facts ("My name is Ana", "I work at Acme", "我住在杭州"),
- switches ("Let's switch to MySQL", "改用 MySQL"), which update an earlier constraint.

Questions, one-off requests and small talk are ignored: a missed memory costs less than a false
one. Each statement keeps the user's own words, so recall can quote it back faithfully.
A statement with a subject and a value (a *slot*: "project database" = "PostgreSQL") lets the
conflict policy replace the old value when the user changes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


@dataclass
class RuleMemory:
    content: str
    type: str  # persona | episodic | instruction
    priority: int
    kind: str  # rule | constraint | preference | habit | fact | event | switch
    scene_name: str
    slot: tuple[str, str] | None = None  # (subject, value)
    switch_to: str | None = None  # the new value of a switch
    switch_from: str | None = None  # the old value, when the user named it


SCENES = {
    "rule": ("Rules for the assistant", "对助手的要求"),
    "constraint": ("Project decisions", "项目约定"),
    "switch": ("Project decisions", "项目约定"),
    "preference": ("Preferences and habits", "偏好与习惯"),
    "habit": ("Preferences and habits", "偏好与习惯"),
    "fact": ("About the user", "个人信息"),
    "event": ("Events", "经历与事件"),
}
KIND_TYPE = {
    "rule": "instruction",
    "constraint": "instruction",
    "switch": "instruction",
    "preference": "persona",
    "habit": "persona",
    "fact": "persona",
    "event": "episodic",
}
KIND_PRIORITY = {
    "rule": 90,
    "constraint": 85,
    "switch": 85,
    "preference": 70,
    "habit": 70,
    "fact": 65,
    "event": 60,
}

# ----------------------------------------------------------------------------- splitting

_ENUM = re.compile(
    r"(?:(?<=^)|(?<=[\s：:;；，,。]))(?:\d{1,2}[.)、．](?!\d)|[①-⑩]|[（(]\d{1,2}[)）])\s*"
)
_BULLET = re.compile(r"^\s*(?:[-*•·]|\d{1,2}[.)、．](?!\d))\s+")
_SENTENCE_EN = re.compile(r"(?<=[.!?;])\s+")
_SENTENCE_ZH = re.compile(r"(?<=[。！？；!?;])")
_FILLERS_EN = re.compile(
    r"^(?:(?:ok(?:ay)?|oh|ah|also|and|so|well|hey|hi|btw|by the way|fyi|actually|"
    r"just so you know|please note(?: that)?|note(?: that)?|one more thing|another thing|"
    r"and also|plus|first|second|third|finally|lastly|next)\b[\s,:;-]*)+",
    re.IGNORECASE,
)
_FILLERS_ZH = re.compile(
    r"^(?:好的|好吧|对了|另外|还有|顺便说一下|顺便说|顺便|嗯+|哦+|那个|其实|然后|而且|并且|首先|其次|最后|第[一二三四五六七八九十]条?|规则[一二三四五六七八九十\d]*)[，,：:\s]*"
)


def sentences(text: str) -> list[str]:
    """Split a message into candidate statements (lines, list items, sentences)."""
    out: list[str] = []
    if "```" in text:
        text = re.sub(r"```.*?(```|\Z)", "\n", text, flags=re.DOTALL)
    for line in text.splitlines():
        line = _BULLET.sub("", line).strip()
        if not line:
            continue
        line = _ENUM.sub("\n", line)
        for piece in line.split("\n"):
            for s in _SENTENCE_ZH.split(piece):
                for t in _SENTENCE_EN.split(s):
                    t = t.strip()
                    if t:
                        out.append(t)
    return out


def _clean(sentence: str) -> str:
    s = sentence.strip().strip("\"'“”‘’「」")
    for _ in range(3):
        s2 = _FILLERS_EN.sub("", s)
        s2 = _FILLERS_ZH.sub("", s2).strip()
        if s2 == s:
            break
        s = s2
    s = re.sub(r"^[\s,，:：;；、-]+", "", s)
    return s.strip()


def _trim_end(s: str) -> str:
    return re.sub(r"[\s,，;；:：.。!！~～]+$", "", s).strip()


# ----------------------------------------------------------------------------- English

_EN_QUESTION = re.compile(
    r"^(?:what|how|why|when|where|who|whom|which|whose|can|could|would|will|do|does|did|is|"
    r"are|was|were|should|shall|may|might|have|has|am)\b",
    re.IGNORECASE,
)
_EN_PERSIST = re.compile(
    r"\b(?:always|never|from now on|going forward|in (?:the )?future|every ?time|each time|"
    r"whenever|by default|at all times|any ?time|all (?:of )?(?:your|the) (?:answers|replies|"
    r"responses|code|commits|messages|output)|in every|consistently|from here on|no matter what)\b",
    re.IGNORECASE,
)
_EN_RULE_START = re.compile(
    r"^(?:please\s+)?(?:always|never|don'?t ever|do not ever|from now on|going forward|"
    r"in (?:the )?future|whenever|every ?time|each time|by default|remember (?:to|that)|"
    r"make sure (?:to |that |you )?always|you (?:must|should|shall|have to|need to)|"
    r"i (?:want|need|would like|'d like) you to|call me|address me as|refer to me as|rule:)\b",
    re.IGNORECASE,
)
_EN_IMPERATIVE = re.compile(
    r"^(?:please\s+)?(?:don'?t|do not|avoid|stop|keep|use|write|answer|reply|respond|speak|"
    r"talk|format|put|add|include|explain|give|show|prefer|only|be|make sure|remember|"
    r"let me know|ask|send|mention|sign|end|start|begin|stick to|default to)\b",
    re.IGNORECASE,
)
_EN_ONE_OFF = re.compile(r"\b(?:this|that|these|those|here|now|today|tonight|yet|it)\b", re.I)
_EN_PREFERENCE = re.compile(
    r"^i(?:'m| am)? (?:really |strongly |much |definitely |do |also |absolutely |totally |"
    r"generally )?(?:like|love|prefer|enjoy|hate|dislike|adore|loathe|can'?t stand|cannot stand|"
    r"don'?t like|do not like|am not a fan of|'m not a fan of|am a (?:big |huge )?fan of|"
    r"'m a (?:big |huge )?fan of|allergic to|am allergic to|'m allergic to|would rather|"
    r"'d rather)\b",
    re.IGNORECASE,
)
_EN_FAVOURITE = re.compile(r"^my (?:all[- ]time )?favou?rite\b", re.IGNORECASE)
_EN_HABIT_ADVERB = re.compile(
    r"^i (?:usually|always|often|normally|typically|generally|never|rarely|seldom|regularly|"
    r"tend to|like to|habitually|routinely|mostly|sometimes)\b",
    re.IGNORECASE,
)
_EN_TIME_PHRASE = re.compile(
    r"\b(?:every|each) (?:single )?(?:day|morning|evening|night|week|weekend|weekday|month|year|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|afternoon|lunch|hour)\b|"
    r"\b(?:daily|weekly|nightly|on weekends|on weekdays|every other day)\b",
    re.IGNORECASE,
)
_STABLE_NOUNS = (
    r"(?:name|full name|nickname|email|e-mail|phone(?: number)?|birthday|age|job|role|title|"
    r"position|profession|occupation|company|employer|team|department|manager|boss|"
    r"wife|husband|partner|girlfriend|boyfriend|son|daughter|kids?|children|brother|sister|"
    r"mother|father|mom|dad|dog|cat|pet|hometown|city|country|address|time ?zone|timezone|"
    r"native language|mother tongue|first language|major|degree|university|school|"
    r"editor|ide|os|operating system|shell|laptop|phone model|stack|tech stack|"
    r"main language|programming language|github(?: handle| username)?|username|handle|"
    r"blood type|diet|allergy|allergies|height|weight|salary|budget)"
)
_EN_FACT = re.compile(
    r"^(?:my name is|i'?m called|i am called|i work(?:ed)? (?:as|at|for|on|in)|"
    r"i(?:'m| am) (?:a|an) (?!bit\b|little\b|lot\b|fan\b)\w+|"
    r"i live(?:d)? in|i(?:'m| am) from|i come from|i was born|i(?:'m| am) \d+|"
    r"i have (?:a|an|one|two|three|four|\d+) (?:\w+ )?(?:dogs?|cats?|pets?|kids?|children|sons?|"
    r"daughters?|brothers?|sisters?|cars?|years? of)\b|i speak|i(?:'m| am) (?:vegetarian|vegan|"
    r"left-handed|right-handed|married|single|retired|based in|located in|studying|learning|"
    r"working on)|i study|i own|i use\b|we use\b|"
    r"my (?:\w+ ){0,2}" + _STABLE_NOUNS + r" (?:is|are|was)\b|"
    r"our (?:project|team|company|app|product|stack|codebase|repo|repository|database|backend|"
    r"frontend|service|api|product|startup|office) (?:is|are|uses|runs|has|lives)\b)",
    re.IGNORECASE,
)
_EN_NOT_RULES = re.compile(
    r"^(?:never ?mind|no worries|don'?t worry|do not worry|don'?t bother|don'?t mind|"
    r"never heard|always happy|always a pleasure)\b",
    re.IGNORECASE,
)
_EN_EVENT = re.compile(
    r"^i (?:just |recently )?(?:went|visited|moved|started|finished|bought|met|travel(?:l)?ed|"
    r"graduated|joined|left|quit|got|had|completed|launched|shipped|released)\b.*\b(?:yesterday|"
    r"last (?:week|month|year|night|weekend)|ago|in (?:19|20)\d\d|this (?:week|month|year)|"
    r"recently|today)\b",
    re.IGNORECASE,
)
_EN_CONSTRAINT = re.compile(
    r"^(?:the |our |my |this |all |every |each )?(?P<subject>[a-z0-9][\w/ .+#-]{1,60}?)\s+"
    r"(?:must|should|has to|have to|needs to|need to|shall|is required to|are required to)"
    r"(?: always| never| not| only)?(?: be| use| run on| run| stay| remain| go)?\s+"
    r"(?P<value>.+)$",
    re.IGNORECASE,
)
_EN_MY_SLOT = re.compile(
    r"^(?:my|our) (?P<subject>[\w -]{1,40}?) (?:is|are) (?:now )?(?P<value>.+)$", re.IGNORECASE
)
_EN_WE_USE = re.compile(
    r"^(?:we|i) (?:use|are using|'re using|am using|'m using) (?P<value>[\w.+# -]{1,40}?) "
    r"(?:for|as) (?:the |our |my )?(?P<subject>[\w -]{2,40})$",
    re.IGNORECASE,
)
_EN_SWITCH = re.compile(
    r"^(?:(?:let'?s|let us|we'?ll|we will|i'?ll|i will|we should|we need to|i want to|"
    r"i'd like to|i would like to|we'?re going to|we are going to|please|now|so|ok|okay|"
    r"instead,?|actually,?|change of plan,?|on second thought,?)\s+)*"
    r"(?:switch|change|move|migrate|swap|go|port|convert|transition)"
    r"(?: (?:the |our |my |this )?(?P<subject>[\w -]{2,40}?))?(?: over| back)? (?:to|into) "
    r"(?P<value>[\w.+# -]{1,40}?)(?: instead| now| from now on| going forward| please|"
    r" for (?:the|this|our) \w+)*$",
    re.IGNORECASE,
)
_EN_INSTEAD = re.compile(
    r"^(?:(?:let'?s|we'?ll|we will|i'?ll|please|actually,?|now)\s+)*use (?P<value>[\w.+# -]{1,40}?)"
    r" instead(?: of (?P<old>[\w.+# -]{1,40}))?$",
    re.IGNORECASE,
)
_EN_REPLACE = re.compile(
    r"^(?:(?:let'?s|we'?ll|we will|please)\s+)*replace (?P<old>[\w.+# -]{1,40}?) with "
    r"(?P<value>[\w.+# -]{1,40})$",
    re.IGNORECASE,
)
_PRONOUN_SUBJECT = re.compile(r"^(?:i|you|we|he|she|they|it|this|that|there)$", re.IGNORECASE)


def _classify_en(s: str) -> RuleMemory | None:
    if s.endswith("?") or _EN_QUESTION.match(s) or _EN_NOT_RULES.match(s):
        return None
    if len(s.split()) < 3 and not _EN_SWITCH.match(s):
        return None
    body = _trim_end(s)
    for pattern in (_EN_SWITCH, _EN_INSTEAD, _EN_REPLACE):
        m = pattern.match(body)
        if m:
            value = _trim_end(m.group("value"))
            subject = (m.groupdict().get("subject") or "").strip() or None
            if subject and _PRONOUN_SUBJECT.match(subject):
                subject = None
            old = (m.groupdict().get("old") or "").strip() or None
            if value:
                return _make(
                    s,
                    "switch",
                    slot=(subject, value) if subject else None,
                    switch_to=value,
                    switch_from=old,
                )
    if _EN_PREFERENCE.match(s) or _EN_FAVOURITE.match(s):
        return _make(s, "preference", slot=_en_slot(body))
    if (
        _EN_HABIT_ADVERB.match(s)
        or (re.match(r"^(?:i|my)\b", s, re.I) and _EN_TIME_PHRASE.search(s))
        or re.match(r"^(?:every|each) (?:day|morning|evening|night|week|weekend)\b.*\bi\b", s, re.I)
    ):
        return _make(s, "habit")
    if _EN_RULE_START.match(s) or (_EN_IMPERATIVE.match(s) and _EN_PERSIST.search(s)):
        return _make(s, "rule")
    if re.match(
        r"^(?:please\s+)?(?:don'?t|do not|avoid|never)\b", s, re.I
    ) and not _EN_ONE_OFF.search(s):
        return _make(s, "rule")
    m = _EN_CONSTRAINT.match(body)
    if m and not _PRONOUN_SUBJECT.match(m.group("subject").split()[0]):
        return _make(s, "constraint", slot=(m.group("subject"), _trim_end(m.group("value"))))
    if _EN_EVENT.match(s):
        return _make(s, "event")
    if _EN_FACT.match(s):
        return _make(s, "fact", slot=_en_slot(body))
    return None


def _en_slot(body: str) -> tuple[str, str] | None:
    for pattern in (_EN_WE_USE, _EN_MY_SLOT):
        m = pattern.match(body)
        if m:
            return (m.group("subject").strip(), _trim_end(m.group("value")))
    return None


# ----------------------------------------------------------------------------- Chinese

_ZH_QUESTION = re.compile(
    r"(?:[?？]|[吗呢么嘛]$|什么|怎么|为什么|为何|如何|哪里|哪个|哪些|是否|能不能|可不可以|要不要|有没有|是不是|多少)"
)
_ZH_PERSIST = re.compile(
    r"以后|今后|之后都|从现在开始|从现在起|往后|始终|总是|永远|一律|每次|一直|所有|任何时候|默认|都要|都用|都不要|都别"
)
_ZH_RULE_START = re.compile(
    r"^(?:请你?|你)?(?:以后|今后|从现在开始|从现在起|从今往后|往后|每次|始终|永远|一律|务必|一定要|"
    r"必须|不要|别再?|不许|不准|禁止|记住|请记住|记得|称呼我|叫我|回答时|回复时|回答问题时)"
)
_ZH_REQUEST = re.compile(r"^(?:请你?|你|回答|回复|写|用|说)")
_ZH_PREFERENCE = re.compile(
    r"^我(?:很|非常|特别|比较|最|超|挺|也|还|一直|真的|不太|更|超级)*"
    r"(?:喜欢|爱|偏好|偏爱|讨厌|不喜欢|不爱|受不了|热爱|钟爱|倾向于|宁愿|对.{1,12}过敏|过敏)"
)
_ZH_FAVOURITE = re.compile(r"^我(?:最)?喜欢的(?P<subject>.{1,10}?)是(?P<value>.+)$")
_ZH_HABIT = re.compile(
    r"^(?:我(?:每天|每晚|每周|每个?(?:早上|早晨|晚上|周末|月|星期)|平时|通常|一般|经常|总是|"
    r"常常|往往|习惯|一直|基本上|每逢|天天)|(?:每天|每晚|每周|平时|通常|一般)(?:早上|早晨|晚上|中午)?我)"
)
_ZH_FACT = re.compile(
    r"^(?:我(?:是(?!说|想|问|指|不是|觉得)|叫|名叫|住在|住|在.{1,20}(?:工作|上班|上学|读书|生活)|来自|"
    r"的.{1,10}(?:是|叫)|有(?!.{0,3}(?:问题|疑问|想法|事|点|个想|些想|些问))|今年|养了|负责|从事|"
    r"会说|正在学|在学|用的是)|我们(?:的)?(?:项目|团队|公司|产品|系统|数据库|后端|前端|服务)|"
    r"我的.{1,8}是)"
)
_ZH_EVENT = re.compile(r"^我(?:昨天|前天|上周|上个?月|去年|今天|刚刚|刚|最近|前几天).{2,}")
_ZH_CONSTRAINT = re.compile(
    r"^(?P<subject>[^，,。：:]{2,20}?)(?:必须|一定要|务必|只能|应该|需要|统一|要)"
    r"(?:是|用|使用|采用|选用|改用|基于|跑在|部署在)?(?P<value>.+)$"
)
_ZH_MY_SLOT = re.compile(r"^(?:我|我们)的(?P<subject>.{1,10}?)(?:是|叫|用的是|用)(?P<value>.+)$")
_ZH_SWITCH = re.compile(
    r"^(?:那|那就|那我们|我们|咱们|还是|就|干脆|以后|现在|请|要)*"
    r"(?:把(?P<subject>.{1,20}?))?(?:换成|改成|改用|切换到|切换成|换到|改为|迁移到|换用|改回|转到|转用|迁到)"
    r"(?P<value>.{1,40})$"
)
_ZH_NOT_ANYMORE = re.compile(
    r"^(?:我们|咱们)?(?:不用|不再用|不要用|别用)(?P<old>.{1,20}?)了?[，,]?(?:改用|换成|改成|用)(?P<value>.{1,40})$"
)
_ZH_PARTICLES = re.compile(r"[吧了啊呀哦呢嘛啦吖]+$")


def _classify_zh(s: str) -> RuleMemory | None:
    body = _trim_end(s)
    if _ZH_QUESTION.search(body):
        return None
    short = len(_CJK.findall(body)) + len(re.findall(r"[A-Za-z0-9]+", body)) < 4
    for pattern in (_ZH_NOT_ANYMORE, _ZH_SWITCH):
        m = pattern.match(body)
        if m:
            value = _trim_end(_ZH_PARTICLES.sub("", m.group("value")))
            subject = (m.groupdict().get("subject") or "").strip() or None
            old = (m.groupdict().get("old") or "").strip() or None
            if value:
                return _make(
                    s,
                    "switch",
                    slot=(subject, value) if subject else None,
                    switch_to=value,
                    switch_from=old,
                )
    if short:
        return None
    m = _ZH_FAVOURITE.match(body)
    if m:
        return _make(s, "preference", slot=("喜欢的" + m.group("subject"), m.group("value")))
    if _ZH_PREFERENCE.match(body):
        return _make(s, "preference")
    if _ZH_HABIT.match(body):
        return _make(s, "habit")
    stripped = re.sub(r"^(?:以后|今后|从现在开始|从现在起|往后)[，,]?", "", body)
    if _ZH_RULE_START.match(body) or (_ZH_REQUEST.match(body) and _ZH_PERSIST.search(body)):
        m = _ZH_CONSTRAINT.match(stripped)
        if m and not re.match(r"^(?:我|你|请|回答|回复)", m.group("subject")):
            return _make(s, "constraint", slot=(m.group("subject"), _trim_end(m.group("value"))))
        return _make(s, "rule")
    m = _ZH_CONSTRAINT.match(stripped)
    if (
        m
        and re.search(r"必须|一定要|务必|只能|统一", body)
        and not re.match(r"^(?:我|你|他|她|它|这|那)", m.group("subject"))
    ):
        return _make(s, "constraint", slot=(m.group("subject"), _trim_end(m.group("value"))))
    if _ZH_EVENT.match(body):
        return _make(s, "event")
    if _ZH_FACT.match(body):
        m = _ZH_MY_SLOT.match(body)
        slot = (m.group("subject"), _trim_end(m.group("value"))) if m else None
        return _make(s, "fact", slot=slot)
    return None


# ----------------------------------------------------------------------------- entry points


def _make(
    sentence: str,
    kind: str,
    slot: tuple[str | None, str] | None = None,
    switch_to: str | None = None,
    switch_from: str | None = None,
) -> RuleMemory:
    zh = has_cjk(sentence)
    content = _trim_end(sentence)
    if not zh and content[:1].islower():
        content = content[0].upper() + content[1:]
    if not re.search(r"[.!。！)）\]]$", content):
        content += "。" if zh else "."
    clean_slot = None
    if slot and slot[0]:
        clean_slot = (slot[0].strip(), slot[1].strip())
    priority = KIND_PRIORITY[kind]
    if kind == "rule" and re.search(
        r"\bnever\b|\bmust\b|必须|禁止|务必|绝不|不许|不准", content, re.I
    ):
        priority = 95
    return RuleMemory(
        content=content,
        type=KIND_TYPE[kind],
        priority=priority,
        kind=kind,
        scene_name=SCENES[kind][1 if zh else 0],
        slot=clean_slot,
        switch_to=switch_to,
        switch_from=switch_from,
    )


_SPLIT_EN = re.compile(
    r",\s*(?:and\s+|but\s+|or\s+)?|\s+and\s+(?=(?:i\b|i'm\b|my\b|always|never|don'?t|do not|please|keep|use|avoid|make|write|answer|reply|respond)\b)",
    re.I,
)
_SPLIT_ZH = re.compile(r"[，,、]|并且|而且|同时")


def _split_compound(sentence: str) -> list[str]:
    """ "Always answer in English, never use emojis, and keep answers short" -> three rules."""
    zh = has_cjk(sentence)
    parts = [p.strip() for p in (_SPLIT_ZH if zh else _SPLIT_EN).split(sentence) if p and p.strip()]
    if len(parts) < 2:
        return [sentence]
    classified = [classify(p, inherit_rule=False) for p in parts]
    first = classify(sentence, inherit_rule=False)
    if first is None:
        return [sentence]
    if first.kind not in ("rule", "constraint"):
        # "My name is Ana and I work at Acme": split only if every piece is a statement.
        return parts if all(c is not None for c in classified) else [sentence]

    # Each piece must stand alone as a rule (or be long enough to be one after a rule opener).
    def long_enough(p: str) -> bool:
        return len(_CJK.findall(p)) >= 4 if zh else len(p.split()) >= 3

    if all(c is not None or long_enough(p) for c, p in zip(classified, parts, strict=True)) and (
        sum(c is not None for c in classified) >= 2
    ):
        return parts
    return [sentence]


def classify(sentence: str, inherit_rule: bool = False) -> RuleMemory | None:
    s = _clean(sentence)
    if not s or len(s) > 300:
        return None
    found = _classify_zh(s) if has_cjk(s) else _classify_en(s)
    if found is None and inherit_rule:
        zh = has_cjk(s)
        if (len(_CJK.findall(s)) >= 4 if zh else len(s.split()) >= 3) and not (
            s.endswith(("?", "？"))
        ):
            return _make(s, "rule")
    return found


_RULE_HEADER = re.compile(
    r"(?:rules?|instructions?|requirements?|guidelines?|conventions?|constraints?|规则|要求|约定|"
    r"规定|规范|注意事项|几点|几条)\s*[:：]$",
    re.IGNORECASE,
)


def extract(text: str) -> list[RuleMemory]:
    """Memories stated in one user message, in order, without duplicates."""
    found: list[tuple[str, RuleMemory | None]] = []
    in_rule_list = False
    for sentence in sentences(text):
        cleaned = _clean(sentence)
        if cleaned.endswith((":", "：")):
            # "Three rules:" / "请记住三条规则：" introduces a list whose items are rules.
            in_rule_list = bool(_RULE_HEADER.search(cleaned))
            continue
        m = re.match(r"^(.{2,60}?[:：])\s*(.+)$", cleaned)
        if m and _RULE_HEADER.search(m.group(1)):
            # "Remember three rules: always X, never Y, and Z" on one line.
            in_rule_list = True
            cleaned = _clean(m.group(2))
        pieces = _split_compound(cleaned)
        inherit = len(pieces) > 1 or in_rule_list
        for piece in pieces:
            found.append((piece, classify(piece, inherit_rule=inherit)))
    # In a message that lists two or more rules, its other imperative lines are rules too
    # ("- Always use type hints / - Never commit to main / - Prefer pytest").
    if sum(1 for _, f in found if f is not None and f.kind == "rule") >= 2:
        found = [
            (p, f if f is not None or not _imperative(p) else classify(p, inherit_rule=True))
            for p, f in found
        ]
    out: list[RuleMemory] = []
    seen: set[str] = set()
    for _, f in found:
        if f is None:
            continue
        key = normalise(f.content)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _imperative(sentence: str) -> bool:
    s = _clean(sentence)
    if has_cjk(s):
        return bool(_ZH_REQUEST.match(s)) and not _ZH_QUESTION.search(s)
    return bool(_EN_IMPERATIVE.match(s)) and not s.endswith("?")


def normalise(text: str) -> str:
    """Comparison key: lower case, no punctuation or spaces."""
    return re.sub(r"[\W_]+", "", text.lower())


_SUBJECT_STOP = {"the", "our", "my", "this", "a", "an", "of", "for", "project's", "的"}


def subject_tokens(subject: str) -> set[str]:
    s = subject.lower().replace("的", " ")
    if has_cjk(s):
        return {s.replace(" ", "")}
    return {t for t in re.findall(r"[\w+#.-]+", s) if t not in _SUBJECT_STOP}


def same_subject(a: str, b: str) -> bool:
    """ "project database" ~ "database" ~ "the project's database"; 项目数据库 ~ 数据库."""
    ta, tb = subject_tokens(a), subject_tokens(b)
    if not ta or not tb:
        return False
    if has_cjk(a) or has_cjk(b):
        x, y = next(iter(ta)), next(iter(tb))
        return x in y or y in x
    return ta <= tb or tb <= ta


def slot_of(content: str) -> tuple[str, str] | None:
    """Re-derive a slot from a stored memory's text (for memories written before or by an LLM)."""
    found = classify(content)
    if found is None:
        return None
    return found.slot if found.kind != "switch" else None


def value_kind(value: str) -> str:
    """Coarse kind of a value, so a switch never replaces an unrelated slot."""
    v = value.strip()
    if has_cjk(v) and not re.search(r"[A-Za-z]", v):
        return "cjk"
    if re.search(r"[A-Za-z]", v):
        return "name"
    return "other"

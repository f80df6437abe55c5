"""Synthetic zh+en workload for the gateway benchmark: texts, vectors and seeded data dirs.

Nothing here is a benchmark by itself (``run_all.py`` skips ``_*.py``); ``gateway_bench.py``
uses it. Everything is deterministic (seeded RNG) and cached under ``bench/out/cache/``:

- L1 facts (persona / episodic / instruction) from ~40 templates over varied zh and en
  vocabulary, all distinct; L0 turns (user + assistant) the same way; a separate set of recall
  queries (paraphrases and keywords, drawn from their own templates).
- Vectors: only ``N_BASE`` distinct texts are embedded with the real local models. Every other
  row gets a normalised mixture of two base vectors plus small noise, so the 100k-row indexes
  have the right size and shape for latency, but recall *quality* at that size is meaningless.
- Data dirs seeded in-process through the Store API (the JSONL files + ``memory.db``, vectors
  in the ``vectors`` table, the vec0 tables built), exactly what the gateway would have written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

OUT = ROOT / "bench" / "out"
CACHE = OUT / "cache"
GENERATOR_VERSION = "gw-synth-4"
SCOPE = "bench"
N_BASE = 2000  # distinct texts embedded for real, per model
NOISE = 0.15  # norm of the gaussian noise added to each synthetic vector (before normalising)

# ------------------------------------------------------------------------------ vocabulary

FOODS_ZH = "川菜 火锅 寿司 拉面 饺子 烧烤 北京烤鸭 麻辣烫 小龙虾 牛肉面 煲仔饭 肠粉 螺蛳粉 披萨 咖喱饭 生煎包 酸菜鱼 羊肉串 凉皮 粤式早茶 臭豆腐 糖醋排骨 宫保鸡丁 兰州拉面 过桥米线 热干面 鸡蛋灌饼 烤冷面 椰子鸡 潮汕牛肉火锅".split()
FOODS_EN = "ramen tacos sushi pho dumplings lasagna falafel bibimbap paella ceviche risotto croissants bagels curry goulash pierogi burritos shakshuka gnocchi poutine".split()
CITIES_ZH = "北京 上海 深圳 广州 杭州 成都 重庆 西安 武汉 南京 苏州 厦门 青岛 大连 长沙 昆明 天津 合肥 郑州 沈阳 哈尔滨 贵阳 南宁 福州 宁波 无锡 珠海 三亚 拉萨 乌鲁木齐".split()
CITIES_EN = "Berlin Tokyo Paris London Seattle Austin Toronto Sydney Singapore Amsterdam Lisbon Dublin Zurich Boston Vancouver Oslo Prague Vienna Seoul Osaka Barcelona Munich Chicago Denver Helsinki Montreal Copenhagen Milan Kyoto Melbourne".split()
DISTRICTS_ZH = "朝阳区 海淀区 浦东新区 徐汇区 南山区 福田区 天河区 西湖区 武侯区 渝中区 雁塔区 江汉区 鼓楼区 姑苏区 思明区".split()
HOBBIES_ZH = "爬山 游泳 摄影 弹吉他 下围棋 跑马拉松 钓鱼 露营 做陶艺 画水彩 骑行 攀岩 滑雪 练书法 打羽毛球 看话剧 养多肉 烘焙 冲浪 学日语 打乒乓球 逛博物馆 拼乐高 玩桌游".split()
HOBBIES_EN = [
    "hiking", "chess", "woodworking", "sailing", "birdwatching", "bouldering", "jazz piano",
    "baking sourdough", "trail running", "knitting", "kayaking", "gardening", "pottery",
    "salsa dancing", "stargazing", "fly fishing", "rock climbing", "board games", "cycling",
    "film photography", "surfing", "fencing", "archery", "beekeeping",
]  # fmt: skip
TOOLS = "Neovim VSCode Emacs IntelliJ PyCharm Zed Vim Xcode Sublime Helix".split()
LANGS = "Rust Go Python TypeScript Kotlin Swift Haskell Elixir Java C++ Scala Ruby Zig OCaml Julia Lua".split()
STACK = "PostgreSQL Redis Kafka Kubernetes Terraform Docker ClickHouse SQLite React Vue Svelte Django FastAPI Flutter Unity gRPC Nginx Elasticsearch MongoDB RabbitMQ Airflow Spark Prometheus Grafana".split()
PETS_ZH = "猫 狗 兔子 仓鼠 鹦鹉 金鱼 乌龟 柯基 布偶猫 柴犬 金毛 英短".split()
PETS_EN = (
    "cat dog rabbit hamster parrot goldfish tortoise corgi beagle husky labrador ferret".split()
)
PET_NAMES = "豆豆 团子 可乐 旺财 咪咪 奶茶 布丁 年糕 汤圆 花卷 Bella Max Luna Milo Oscar Coco Pepper Nacho Biscuit Mochi Tofu Ziggy".split()
PEOPLE_ZH = "张伟 王芳 李娜 刘洋 陈静 杨帆 赵磊 黄婷 周杰 吴敏 徐强 孙丽 马超 朱琳 胡军 郭涛 林峰 何雪 高飞 罗敏 梁晨 宋佳 唐亮 韩雪".split()
PEOPLE_EN = "Alice Bob Carol David Emma Frank Grace Henry Irene Jack Karen Leo Maria Nina Oliver Priya Quentin Rosa Sam Tina Umar Vera Walter Yuki".split()
RELATIONS_ZH = "同事 老板 妹妹 哥哥 大学室友 邻居 表姐 导师 客户 合伙人 高中同学 舅舅".split()
RELATIONS_EN = "coworker manager sister brother roommate neighbour cousin mentor client co-founder uncle aunt".split()
ALLERGENS_ZH = "花生 海鲜 乳糖 芒果 猫毛 花粉 青霉素 麸质 鸡蛋 坚果 尘螨 酒精".split()
ALLERGENS_EN = "peanuts shellfish lactose gluten pollen penicillin eggs tree nuts dust mites sesame soy latex".split()
COMPANIES_ZH = (
    "腾讯 阿里巴巴 字节跳动 华为 美团 京东 小米 网易 百度 拼多多 蔚来 大疆 携程 快手".split()
)
COMPANIES_EN = "Google Microsoft Stripe Shopify Spotify Airbnb Netflix Atlassian Datadog Figma Cloudflare GitLab Canva Notion".split()
JOBS_ZH = "后端工程师 产品经理 数据分析师 设计师 运维工程师 算法研究员 前端工程师 测试工程师 项目经理 架构师 律师 医生 老师 会计".split()
JOBS_EN = ["backend engineer", "product manager", "data scientist", "designer", "SRE", "researcher", "frontend developer", "QA lead", "architect", "lawyer", "nurse", "teacher", "accountant"]  # fmt: skip
DRINKS_ZH = "美式咖啡 拿铁 乌龙茶 普洱 绿茶 燕麦拿铁 气泡水 豆浆 柠檬茶 奶茶".split()
DRINKS_EN = "espresso flat-white matcha chai cold-brew green-tea kombucha oat-latte cortado yerba-mate".split()
SINGERS = "周杰伦 陈奕迅 五月天 王菲 林俊杰 邓紫棋 李健 朴树 Radiohead Coldplay Adele BTS Beyonce Bach Chopin Miles-Davis".split()
BOOKS_ZH = "《三体》 《活着》 《百年孤独》 《围城》 《红楼梦》 《人类简史》 《原则》 《置身事内》 《长安的荔枝》 《额尔古纳河右岸》".split()
BOOKS_EN = ["Dune", "Sapiens", "The Pragmatic Programmer", "Project Hail Mary", "Designing Data-Intensive Applications", "The Three-Body Problem", "Atomic Habits", "Thinking, Fast and Slow", "Educated", "The Name of the Wind"]  # fmt: skip
PROJECTS = "billing search checkout recommendation payments analytics onboarding notification gateway ledger inventory crawler chatbot dashboard auth".split()
TRANSPORT_EN = "subway bike bus car ferry scooter tram".split()
STYLES_ZH = "简洁的中文 要点列表 正式的语气 口语化的表达 先给结论再解释 带代码示例的回答".split()
AVOID_ZH = "使用表情符号 长篇大论 重复问题 给出未经验证的链接 用英文缩写".split()
CONVENTIONS = "snake_case camelCase 四个空格缩进 tabs 类型注解 docstring 单元测试 conventional-commits".split()
EVENTS_ZH = "公司羽毛球赛 城市马拉松 黑客松 围棋比赛 摄影展 编程大赛 读书会 乐队演出".split()
CLINICS_ZH = "协和医院 华山医院 社区医院 口腔诊所 眼科医院 中医院".split()
BODY_ZH = "牙齿 视力 血压 膝盖 颈椎 血糖 胃 皮肤".split()
PRODUCTS_EN = "laptop camera bike espresso-machine keyboard standing-desk headphones tent drone e-reader".split()
BRANDS = "Apple Sony Lenovo Fujifilm Trek Breville Keychron Bose Kindle DJI Xiaomi Huawei".split()
OPINIONS_ZH = "非常好吃 一般般 太咸了 性价比很高 排队太久 环境不错 服务很差 值得再去".split()
ERRORS = ["segfault", "timeout", "OOM", "deadlock", "401 Unauthorized", "connection reset", "ImportError", "null pointer", "race condition", "stack overflow"]  # fmt: skip
PLACES_ZH = (
    "西湖 外滩 故宫 宽窄巷子 鼓浪屿 洪崖洞 大雁塔 黄鹤楼 夫子庙 拙政园 中山公园 滨江步道".split()
)
PLACES_EN = "the harbour the old town the botanical garden the river trail the night market the museum quarter the lake the ski resort".split()
MONTHS_EN = (
    "January February March April May June July August September October November December".split()
)


def _date_zh(r: random.Random) -> str:
    return f"{r.randint(2022, 2025)}年{r.randint(1, 12)}月{r.randint(1, 28)}日"


def _date_en(r: random.Random) -> str:
    return f"{r.choice(MONTHS_EN)} {r.randint(1, 28)}, {r.randint(2022, 2025)}"


def _c(r: random.Random, seq: list[str]) -> str:
    return r.choice(seq)


# (type, priority, template function)
FACT_TEMPLATES = [
    ("persona", 80, lambda r: f"用户喜欢吃{_c(r, FOODS_ZH)}，尤其是{_c(r, CITIES_ZH)}那家开了{r.randint(3, 40)}年的老店"),
    ("persona", 90, lambda r: f"用户对{_c(r, ALLERGENS_ZH)}过敏，点餐和买药时都需要避开"),
    ("persona", 70, lambda r: f"用户是一名{_c(r, JOBS_ZH)}，在{_c(r, COMPANIES_ZH)}工作了{r.randint(1, 15)}年"),
    ("persona", 60, lambda r: f"用户养了一只{_c(r, PETS_ZH)}，名字叫{_c(r, PET_NAMES)}，今年{r.randint(1, 14)}岁"),
    ("persona", 60, lambda r: f"用户周末经常去{_c(r, HOBBIES_ZH)}，已经坚持了{r.randint(1, 20)}年"),
    ("persona", 50, lambda r: f"用户每天早上喝一杯{_c(r, DRINKS_ZH)}，下午{r.randint(2, 5)}点以后不喝咖啡"),
    ("persona", 40, lambda r: f"用户最喜欢的歌手是{_c(r, SINGERS)}，去看过{r.randint(1, 9)}次演唱会"),
    ("persona", 70, lambda r: f"用户住在{_c(r, CITIES_ZH)}{_c(r, DISTRICTS_ZH)}，通勤大约{r.randint(10, 90)}分钟"),
    ("persona", 40, lambda r: f"用户正在读{_c(r, BOOKS_ZH)}，读到第{r.randint(2, 40)}章"),
    ("persona", 60, lambda r: f"用户的{_c(r, RELATIONS_ZH)}{_c(r, PEOPLE_ZH)}在{_c(r, CITIES_ZH)}做{_c(r, JOBS_ZH)}"),
    ("persona", 70, lambda r: f"用户日常用 {_c(r, TOOLS)} 写 {_c(r, LANGS)}，部署在 {_c(r, STACK)} 上"),
    ("persona", 80, lambda r: f"The user prefers {_c(r, TOOLS)} for {_c(r, LANGS)} work and dislikes {_c(r, TOOLS)}"),
    ("persona", 90, lambda r: f"User is allergic to {_c(r, ALLERGENS_EN)} and always checks labels ({r.randint(1, 99)})"),
    ("persona", 70, lambda r: f"The user lives in {_c(r, CITIES_EN)} and commutes by {_c(r, TRANSPORT_EN)} for about {r.randint(5, 80)} minutes"),
    ("persona", 60, lambda r: f"User's {_c(r, RELATIONS_EN)} {_c(r, PEOPLE_EN)} works at {_c(r, COMPANIES_EN)} as a {_c(r, JOBS_EN)}"),
    ("persona", 60, lambda r: f"User enjoys {_c(r, HOBBIES_EN)} on weekends, usually near {_c(r, PLACES_EN)} in {_c(r, CITIES_EN)}"),
    ("persona", 50, lambda r: f"User drinks a {_c(r, DRINKS_EN)} every morning and at most {r.randint(1, 4)} coffees a day"),
    ("persona", 60, lambda r: f"The user's {_c(r, PETS_EN)} is called {_c(r, PET_NAMES)} and is {r.randint(1, 15)} years old"),
    ("persona", 50, lambda r: f"User is reading {_c(r, BOOKS_EN)} and is on chapter {r.randint(2, 40)}"),
    ("persona", 70, lambda r: f"User works as a {_c(r, JOBS_EN)} at {_c(r, COMPANIES_EN)} on the {_c(r, PROJECTS)} team since {r.randint(2012, 2025)}"),
    ("instruction", 90, lambda r: f"回答时请使用{_c(r, STYLES_ZH)}，不要{_c(r, AVOID_ZH)}"),
    ("instruction", 85, lambda r: f"写 {_c(r, LANGS)} 代码时统一使用 {_c(r, CONVENTIONS)}，行宽不超过 {r.choice([80, 88, 100, 120])}"),
    ("instruction", 85, lambda r: f"提交 {_c(r, PROJECTS)} 项目的代码前必须先跑 {_c(r, STACK)} 集成测试"),
    ("instruction", 90, lambda r: f"When writing {_c(r, LANGS)} for the {_c(r, PROJECTS)} service, use {_c(r, CONVENTIONS)} and keep functions under {r.randint(20, 80)} lines"),
    ("instruction", 80, lambda r: f"Always summarise {_c(r, STACK)} incidents in {r.randint(3, 7)} bullet points before proposing fixes"),
    ("instruction", 80, lambda r: f"Never schedule meetings with {_c(r, PEOPLE_EN)} before {r.randint(8, 11)} am {_c(r, CITIES_EN)} time"),
    ("episodic", 50, lambda r: f"{_date_zh(r)}用户去{_c(r, CITIES_ZH)}出差，见了{_c(r, RELATIONS_ZH)}{_c(r, PEOPLE_ZH)}"),
    ("episodic", 40, lambda r: f"{_date_zh(r)}用户在{_c(r, CITIES_ZH)}的{_c(r, PLACES_ZH)}附近吃了{_c(r, FOODS_ZH)}，觉得{_c(r, OPINIONS_ZH)}"),
    ("episodic", 50, lambda r: f"{_date_zh(r)}用户参加了{_c(r, EVENTS_ZH)}，拿到了第{r.randint(1, 30)}名"),
    ("episodic", 60, lambda r: f"用户{_date_zh(r)}预约了{_c(r, CLINICS_ZH)}，复查{_c(r, BODY_ZH)}，医生建议{r.randint(1, 12)}个月后再来"),
    ("episodic", 50, lambda r: f"用户最近在学习 {_c(r, LANGS)}，目标是{_date_zh(r)}之前把 {_c(r, PROJECTS)} 服务迁移到 {_c(r, STACK)}"),
    ("episodic", 50, lambda r: f"On {_date_en(r)} the user migrated the {_c(r, PROJECTS)} service from {_c(r, STACK)} to {_c(r, STACK)}"),
    ("episodic", 50, lambda r: f"On {_date_en(r)} the user met {_c(r, PEOPLE_EN)} in {_c(r, CITIES_EN)} to discuss the {_c(r, PROJECTS)} launch"),
    ("episodic", 40, lambda r: f"User bought a {_c(r, PRODUCTS_EN)} from {_c(r, BRANDS)} for {r.randint(2, 300) * 50} yuan in {_c(r, MONTHS_EN)} {r.randint(2022, 2025)}"),
    ("episodic", 40, lambda r: f"In {_c(r, MONTHS_EN)} {r.randint(2022, 2025)} the user tried {_c(r, FOODS_EN)} at {_c(r, PLACES_EN)} in {_c(r, CITIES_EN)} and rated it {r.randint(1, 10)}/10"),
    ("episodic", 50, lambda r: f"The user fixed a {_c(r, ERRORS)} in the {_c(r, PROJECTS)} {_c(r, LANGS)} code on {_date_en(r)}"),
    ("episodic", 40, lambda r: f"用户和{_c(r, PEOPLE_ZH)}约好{_date_zh(r)}一起去{_c(r, CITIES_EN)}旅行，计划{_c(r, HOBBIES_ZH)}"),
    ("episodic", 40, lambda r: f"On {_date_en(r)} the user adopted a {_c(r, PETS_EN)} named {_c(r, PET_NAMES)} from a shelter in {_c(r, CITIES_EN)}"),
]  # fmt: skip

SCENES = ["", "", "", "饮食偏好", "工作与项目", "健康", "旅行", "家人朋友", "coding", "hobbies"]

QUERY_TEMPLATES = [
    lambda r: "我有什么忌口吗",
    lambda r: "附近有什么川菜馆推荐",
    lambda r: f"推荐一家{_c(r, CITIES_ZH)}的餐厅",
    lambda r: f"我上次去{_c(r, CITIES_ZH)}是做什么",
    lambda r: "我养的宠物叫什么名字",
    lambda r: "我在哪家公司上班，做什么工作",
    lambda r: "周末一般安排什么活动",
    lambda r: "我早上习惯喝什么",
    lambda r: f"{_c(r, ALLERGENS_ZH)}过敏",
    lambda r: "我最近在看什么书",
    lambda r: f"{_c(r, PEOPLE_ZH)}是谁",
    lambda r: "提交代码之前要做哪些检查",
    lambda r: "回答问题时我有什么格式要求",
    lambda r: "我住在哪里，上班远吗",
    lambda r: "最近一次体检或者看医生是什么时候",
    lambda r: f"{_c(r, LANGS)} 代码风格",
    lambda r: f"{_c(r, STACK)} 迁移进度",
    lambda r: "what should I avoid eating",
    lambda r: "which editor do I like",
    lambda r: f"what did I do in {_c(r, CITIES_EN)}",
    lambda r: f"who is {_c(r, PEOPLE_EN)}",
    lambda r: "how long is my commute",
    lambda r: f"{_c(r, PROJECTS)} service migration",
    lambda r: "coding conventions I asked for",
    lambda r: f"my {_c(r, RELATIONS_EN)}'s job",
    lambda r: "what gadgets did I buy recently",
    lambda r: f"{_c(r, HOBBIES_EN)} plans this weekend",
    lambda r: "favourite music",
    lambda r: f"帮我写一段 {_c(r, LANGS)} 的 {_c(r, STACK)} 客户端",
    lambda r: f"下个月去{_c(r, CITIES_ZH)}玩，有什么建议",
    lambda r: f"meeting with {_c(r, PEOPLE_EN)} next week, anything to remember?",
]

USER_TURNS = [
    lambda r: f"帮我规划一下下周去{_c(r, CITIES_ZH)}的行程，我想{_c(r, HOBBIES_ZH)}，顺便尝尝{_c(r, FOODS_ZH)}。",
    lambda r: f"Can you help me debug this {_c(r, LANGS)} {_c(r, ERRORS)}? It happens when the {_c(r, PROJECTS)} tests hit {_c(r, STACK)}.",
    lambda r: f"我在用 {_c(r, LANGS)} 写 {_c(r, PROJECTS)} 模块，遇到 {_c(r, ERRORS)}，日志里只有一行 stack trace，怎么排查？",
    lambda r: f"提醒我{_date_zh(r)}要给{_c(r, RELATIONS_ZH)}{_c(r, PEOPLE_ZH)}打电话，别忘了。",
    lambda r: f"What's a good {_c(r, FOODS_EN)} place near {_c(r, PLACES_EN)} in {_c(r, CITIES_EN)}? I'm allergic to {_c(r, ALLERGENS_EN)}.",
    lambda r: f"我对{_c(r, ALLERGENS_ZH)}过敏，这周想在家做{_c(r, FOODS_ZH)}，有什么替代食材？",
    lambda r: f"Summarise the {_c(r, STACK)} incident from {_date_en(r)} for {_c(r, PEOPLE_EN)}, keep it short.",
    lambda r: f"最近在读{_c(r, BOOKS_ZH)}，第{r.randint(2, 30)}章那段你怎么理解？",
    lambda r: f"Compare {_c(r, STACK)} and {_c(r, STACK)} for our {_c(r, PROJECTS)} workload, we do about {r.randint(1, 900)}k requests a day.",
    lambda r: f"我的{_c(r, PETS_ZH)}{_c(r, PET_NAMES)}最近不爱吃东西，要不要带去医院？",
]  # fmt: skip

ASSISTANT_SENTENCES = [
    lambda r: f"好的，我先整理一下{_c(r, CITIES_ZH)}的情况：建议第一天去{_c(r, PLACES_ZH)}，晚上可以吃{_c(r, FOODS_ZH)}。",
    lambda r: f"从日志看，{_c(r, ERRORS)} 很可能来自 {_c(r, STACK)} 的连接池配置，先把超时调到 {r.randint(1, 30)} 秒再观察。",
    lambda r: f"Sure. The short version: {_c(r, STACK)} handles this better because of its {r.choice(['storage engine', 'replication', 'query planner', 'backpressure'])} design.",
    lambda r: f"I'd start by reproducing it locally with {_c(r, LANGS)} {r.randint(1, 3)}.{r.randint(0, 12)} and a minimal {_c(r, PROJECTS)} fixture.",
    lambda r: f"考虑到你对{_c(r, ALLERGENS_ZH)}过敏，可以换成{_c(r, FOODS_ZH)}的做法，口味差别不大。",
    lambda r: f"Here is a checklist for {_date_en(r)}: confirm the venue in {_c(r, CITIES_EN)}, send the agenda to {_c(r, PEOPLE_EN)}, book the {_c(r, TRANSPORT_EN)}.",
    lambda r: f"这个问题可以分{r.randint(2, 5)}步：先确认版本，再检查 {_c(r, STACK)} 的配置，最后补一个单元测试覆盖 {_c(r, ERRORS)} 的情况。",
    lambda r: f"{_c(r, BOOKS_EN)} makes a similar point in chapter {r.randint(1, 30)}, if you want a second perspective.",
    lambda r: f"如果{_c(r, PET_NAMES)}超过{r.randint(1, 3)}天不吃东西，建议尽快去宠物医院，顺便查一下{_c(r, BODY_ZH)}。",
    lambda r: f"Rough numbers: at {r.randint(1, 900)}k requests/day you need about {r.randint(2, 16)} vCPUs and {r.randint(4, 64)} GB RAM.",
]  # fmt: skip


def gen_facts(n: int, seed: int = 1) -> list[dict]:
    """``n`` distinct L1 facts: ``{content, type, priority, scene_name}``."""
    r = random.Random(seed)
    seen: set[str] = set()
    out: list[dict] = []
    while len(out) < n:
        typ, prio, fn = r.choice(FACT_TEMPLATES)
        text = fn(r)
        if text in seen:
            continue
        seen.add(text)
        out.append(
            {
                "content": text,
                "type": typ,
                "priority": max(1, min(100, prio + r.randint(-10, 10))),
                "scene_name": r.choice(SCENES),
            }
        )
    return out


def gen_queries(n: int, seed: int = 7, distinct: bool = False) -> list[str]:
    """Recall queries from their own templates (paraphrases and keywords, not fact texts).
    ``distinct``: no query twice (the templates give ~620), for latency figures that must not
    count the gateway's query-vector cache (200 plain draws hold 104 distinct queries)."""
    r = random.Random(seed)
    if not distinct:
        return [r.choice(QUERY_TEMPLATES)(r) for _ in range(n)]
    out: dict[str, None] = {}
    for _ in range(100 * n):
        out.setdefault(r.choice(QUERY_TEMPLATES)(r))
        if len(out) == n:
            break
    return list(out)


def gen_turn(r: random.Random) -> tuple[str, str]:
    """One realistic turn: a user message and a 2-4 sentence assistant answer (zh/en mixed)."""
    user = r.choice(USER_TURNS)(r)
    answer = " ".join(r.choice(ASSISTANT_SENTENCES)(r) for _ in range(r.randint(2, 4)))
    return user, answer


def gen_l0(n_messages: int, seed: int = 3) -> list[tuple[str, str]]:
    """``n_messages`` distinct ``(role, content)`` in turn order (user, assistant, ...)."""
    r = random.Random(seed)
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    while len(out) < n_messages:
        user, answer = gen_turn(r)
        if user in seen or answer in seen:
            continue
        seen.update((user, answer))
        out.append(("user", user))
        out.append(("assistant", answer))
    return out[:n_messages]


# ------------------------------------------------------------------------------ vectors


def _embedders():
    from types import SimpleNamespace

    from memory_tencentdb.embedding import load_embedders

    embs, warnings = load_embedders(SimpleNamespace(provider="local", model=""))
    if warnings:
        print("  embedder warnings:", warnings, flush=True)
    return embs


def base_vectors(log=print) -> dict[str, np.ndarray]:
    """Real embeddings of the first ``N_BASE`` facts, per model id (cached)."""
    texts = [f["content"] for f in gen_facts(N_BASE)]
    digest = hashlib.sha1("\n".join(texts).encode()).hexdigest()[:10]
    out: dict[str, np.ndarray] = {}
    for emb in _embedders():
        tag = hashlib.sha1(emb.model_id.encode()).hexdigest()[:10]
        path = CACHE / f"base-{tag}-{digest}.npy"
        if path.exists():
            out[emb.model_id] = np.load(path)
            continue
        log(f"  embedding {len(texts)} base texts with {emb.model_id} (once, cached)")
        t0 = time.perf_counter()
        emb.warm()
        chunks = [emb.embed(texts[i : i + 32]) for i in range(0, len(texts), 32)]
        mat = np.vstack(chunks).astype(np.float32)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, mat)
        log(f"    {time.perf_counter() - t0:.1f}s")
        out[emb.model_id] = mat
    return out


def synthetic_vectors(base: np.ndarray, start: int, count: int, seed: int) -> np.ndarray:
    """Rows ``start .. start+count``: real base vectors first, then noisy base mixtures."""
    n_base, dim = base.shape
    r = np.random.default_rng(seed + start)
    a = r.integers(0, n_base, count)
    b = r.integers(0, n_base, count)
    w = r.uniform(0.3, 0.9, (count, 1)).astype(np.float32)
    noise = r.standard_normal((count, dim)).astype(np.float32) * (NOISE / np.sqrt(dim))
    vec = w * base[a] + (1 - w) * base[b] + noise
    idx = np.arange(start, start + count)
    real = idx < n_base
    vec[real] = base[idx[real]]
    vec /= np.linalg.norm(vec, axis=1, keepdims=True)
    return vec.astype(np.float32)


# ------------------------------------------------------------------------------ data dirs


def schema_fingerprint() -> str:
    """Hash of the schema a fresh store gets: a cache built on another schema is rebuilt."""
    import tempfile

    from memory_tencentdb.store.sqlite.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp), UTC)
        try:
            rows = (
                store.reader()
                .execute(
                    "SELECT type, name, coalesce(sql, '') FROM sqlite_master ORDER BY type, name"
                )
                .fetchall()
            )
        finally:
            store.close()
    return hashlib.sha1(repr(rows).encode()).hexdigest()[:12]


def _manifest(n_l1: int, n_l0: int, models: list[str]) -> dict:
    return {
        "generator": GENERATOR_VERSION,
        "schema": schema_fingerprint(),
        "n_base": N_BASE,
        "l1": n_l1,
        "l0": n_l0,
        "models": sorted(models),
        "scope": SCOPE,
    }


def dataset(name: str, n_l1: int, n_l0: int, log=print) -> Path:
    """A seeded data dir under the cache (built once): ``n_l1`` facts, ``n_l0`` messages."""
    base = base_vectors(log)
    want = _manifest(n_l1, n_l0, list(base))
    final = CACHE / name
    mf = final / "bench-manifest.json"
    if mf.exists() and json.loads(mf.read_text()) == want:
        return final
    building = CACHE / f"{name}.building"
    shutil.rmtree(building, ignore_errors=True)
    shutil.rmtree(final, ignore_errors=True)
    t0 = time.perf_counter()
    log(f"  seeding {name}: {n_l1} L1 + {n_l0} L0 (once, cached)")
    _seed(building, n_l1, n_l0, base, log)
    (building / "bench-manifest.json").write_text(json.dumps(want, indent=1))
    building.rename(final)
    log(f"    {name} built in {time.perf_counter() - t0:.0f}s")
    return final


def _seed(data_dir: Path, n_l1: int, n_l0: int, base: dict[str, np.ndarray], log) -> None:
    from memory_tencentdb.store import files
    from memory_tencentdb.store.records import L0Input
    from memory_tencentdb.store.sqlite.store import Store
    from memory_tencentdb.text import tokenize

    tokenize.warm_up()
    store = Store(data_dir, UTC)
    try:
        for model, mat in base.items():
            # vec0 for L0 (the gateway's default) and for L1 (the side-by-side with numpy);
            # opened before the vectors are saved so save_vectors fills them.
            for layer in ("l0", "l1"):
                store.open_index(layer, model, mat.shape[1], "vec0")
        if n_l1:
            _seed_l1(store, files, n_l1, log)
        if n_l0:
            _seed_l0(store, L0Input, n_l0, log)
        for layer, n in (("l1", n_l1), ("l0", n_l0)):
            if not n:
                continue
            table = "l1_memories" if layer == "l1" else "l0_messages"
            rows = (
                store.reader()
                .execute(f"SELECT rowid, scope, text_hash FROM {table} ORDER BY rowid")
                .fetchall()
            )
            for model, mat in base.items():
                t0 = time.perf_counter()
                seed = 11 if layer == "l1" else 29
                step = 5000
                for i in range(0, len(rows), step):
                    chunk = rows[i : i + step]
                    vecs = synthetic_vectors(mat, i, len(chunk), seed)
                    store.save_vectors(
                        layer,
                        model,
                        [(rid, sc, h, v) for (rid, sc, h), v in zip(chunk, vecs, strict=True)],
                    )
                log(f"    {layer} vectors {model}: {time.perf_counter() - t0:.0f}s")
            for model in base:
                left = store.missing_vectors(layer, model, 5)
                assert not left, f"rows without vectors after seeding: {left}"
    finally:
        store.close()


@contextlib.contextmanager
def _one_transaction(store):
    """Run many ``Store`` writes in one transaction (seeding only: same rows, fewer commits)."""
    with store.transaction():
        yield


def _seed_l1(store, files, n: int, log) -> None:
    """What ``Store.write_memory`` does, with one fsync per 5000 lines instead of per line."""
    t0 = time.perf_counter()
    facts = gen_facts(n)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    rel = files.day_file("records", datetime.now(UTC), store.tz)
    step = 5000
    for i in range(0, n, step):
        lines = []
        for j, f in enumerate(facts[i : i + step], i):
            ts = (start + timedelta(minutes=7 * j)).isoformat(timespec="milliseconds")
            ts = ts.replace("+00:00", "Z")
            lines.append(
                {
                    "op": "upsert",
                    "id": f"m_bench_{j:06d}",
                    "scope": SCOPE,
                    "content": f["content"],
                    "type": f["type"],
                    "priority": f["priority"],
                    "scene_name": f["scene_name"],
                    "session_key": f"bench-seed-{j % 400}",
                    "session_id": "",
                    "source_message_ids": [],
                    "metadata": {},
                    "timestamps": [ts],
                    "created_at": ts,
                    "updated_at": ts,
                    "status": "active",
                    "origin": "bench",
                }
            )
        files.append_lines(store.data_dir / rel, lines)
        with _one_transaction(store):
            for line in lines:
                store.index_l1_line(line, rel)
    log(f"    L1 rows: {time.perf_counter() - t0:.0f}s")


def _seed_l0(store, L0Input, n: int, log) -> None:  # noqa: N803 - the class is passed in
    t0 = time.perf_counter()
    msgs = gen_l0(n)
    base_ts = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp() * 1000)
    step = 1000
    for i in range(0, n, step):
        batch = [
            L0Input(
                scope=SCOPE,
                session_key=f"bench-seed-{(j // 20) % 500}",
                session_id=f"s{j // 20}",
                role=role,
                content=content,
                timestamp=base_ts + j * 60_000,
            )
            for j, (role, content) in enumerate(msgs[i : i + step], i)
        ]
        store.record_messages(batch)
    log(f"    L0 rows: {time.perf_counter() - t0:.0f}s")


def materialise(src: Path, dest: Path, log=print) -> dict:
    """A writable copy of a cached data dir, with the pipeline's progress caught up.

    The seeded rows were written through the Store, not through ``/capture``, so the pipeline
    would see 100k unprocessed messages and spend the whole benchmark extracting them. A real
    store of that size has its cursors at the end; this sets them there (through the pipeline's
    own state module, on the current schema) so the gateway starts in that steady state.
    """
    from memory_tencentdb.store.sqlite.store import Store

    t0 = time.perf_counter()
    shutil.copytree(src, dest)
    copied = time.perf_counter() - t0
    note = "pipeline cursors set to the end of the seeded data"
    store = Store(dest, UTC)
    try:
        try:
            from memory_tencentdb.pipeline import state
        except ImportError:
            state = None
            note = "no pipeline module: nothing to catch up"
        if state is not None:
            sessions = (
                store.reader()
                .execute("SELECT scope, session_key, max(rowid) FROM l0_messages GROUP BY 1, 2")
                .fetchall()
            )
            for scope, key, mx in sessions:
                state.update_session(store, scope, key, l1_cursor=int(mx))
            for scope, mx in (
                store.reader()
                .execute("SELECT scope, max(rowid) FROM l1_memories GROUP BY 1")
                .fetchall()
            ):
                state.update_scope(store, scope, l2_cursor=int(mx))
            left = state.backlog_sessions(store)
            if left:
                note = f"pipeline backlog left after catch-up: {len(left)} session(s)"
    except Exception as e:  # noqa: BLE001 - the pipeline is optional for these figures
        note = f"pipeline catch-up failed: {type(e).__name__}: {e}"
    try:
        filled = _fill_missing_vectors(store)
    finally:
        store.close()
    log(f"  copied {src.name} in {copied:.1f}s; {note}; vectors filled {filled}")
    return {"copy_s": round(copied, 1), "pipeline": note, "vectors_filled": filled}


def _sample_missing(store, layer: str, model: str, n: int = 500) -> int:
    """How many of ``n`` evenly spread rows lack a vector (a full scan is slow at 100k)."""
    table = "l1_memories" if layer == "l1" else "l0_messages"
    total = store.reader().execute(f"SELECT max(rowid) FROM {table}").fetchone()[0] or 0
    ids = sorted({1 + (i * total) // n for i in range(n)}) if total else []
    return len(store.missing_vectors(layer, model, len(ids), rowids=ids)) if ids else 0


def _fill_missing_vectors(store) -> int:
    """Give synthetic vectors to rows the current code considers unembedded.

    Normally none: but if the text-hash recipe changed since the cache was built, the gateway
    would otherwise spend the benchmark re-embedding 200k rows in the background.
    """
    base = base_vectors(lambda *_: None)
    filled = 0
    for layer in ("l1", "l0"):
        for model, mat in base.items():
            if not _sample_missing(store, layer, model):
                continue
            for lay in ("l0", "l1"):
                store.open_index(lay, model, mat.shape[1], "vec0")
            while rows := store.missing_vectors(layer, model, 5000):
                vecs = synthetic_vectors(mat, int(rows[0][0]), len(rows), 97)
                store.save_vectors(
                    layer,
                    model,
                    [(r, sc, h, v) for (r, sc, h, _), v in zip(rows, vecs, strict=True)],
                )
                filled += len(rows)
    return filled

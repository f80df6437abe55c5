"""A coding session whose tool outputs are Chinese (logs, a design document, test failures), in
the recordings' OpenAI format, so offload is exercised on CJK text as well as on the English
recordings. The texts are built deterministically from a few hand-written lines."""

from __future__ import annotations

import json

from tests.support.agent_sessions import Message

SYSTEM = "你是一个在命令行里工作的编程助手。You can run bash commands with the `bash` tool."

_LOG_LINES = [
    "2026-03-25 16:5{m}:{s:02d} INFO  订单服务 启动完成，监听端口 808{m}",
    "2026-03-25 16:5{m}:{s:02d} WARN  库存查询 超时 {s} 毫秒，重试第 {m} 次",
    "2026-03-25 16:5{m}:{s:02d} INFO  用户 u{s:04d} 提交订单 #{m}{s:03d}，金额 ¥{s}.{m}0",
    "2026-03-25 16:5{m}:{s:02d} ERROR 支付回调 签名校验失败：参数 sign 与计算值不一致（订单 #{m}{s:03d}）",
]

_DOC = """# 订单服务设计说明（第 {k} 节）

本节说明订单状态机。订单创建后进入“待支付”，支付成功后进入“已支付”，超过 30 分钟未支付则自动“已取消”。
退款流程：用户申请退款后进入“退款中”，财务审核通过后进入“已退款”；审核拒绝则回到“已支付”。
注意：库存在“待支付”阶段只做预占，真正扣减发生在支付回调校验通过之后。文件 src/order/state_machine.py 第 {k}0 行。
"""

_PYTEST = """=================================== 失败 ===================================
___________________________ test_refund_flow_{k} ____________________________
    def test_refund_flow_{k}():
        order = make_order(amount={k}00)
>       assert order.refund() == "已退款"
E       AssertionError: 期望状态“已退款”，实际为“退款中”
tests/test_refund.py:{k}2: AssertionError
"""


def log_output(lines: int) -> str:
    return "\n".join(_LOG_LINES[i % 4].format(m=(i // 60) % 10, s=i % 60) for i in range(lines))


def doc_output(sections: int) -> str:
    return "\n".join(_DOC.format(k=k) for k in range(1, sections + 1))


def pytest_output(failures: int) -> str:
    head = "============================= 测试开始 ==============================\n"
    body = "".join(_PYTEST.format(k=k) for k in range(1, failures + 1))
    return (
        head
        + body
        + f"=========== {failures} 个失败，{failures * 3} 个通过，用时 4.21 秒 ===========\n"
    )


def _call(i: int, cmd: str) -> Message:
    return {
        "role": "assistant",
        "content": f"第 {i} 步：运行 `{cmd}`。",
        "tool_calls": [
            {
                "id": f"call_zh_{i:02d}",
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": cmd})},
            }
        ],
    }


def _result(i: int, text: str) -> Message:
    return {"role": "tool", "tool_call_id": f"call_zh_{i:02d}", "name": "bash", "content": text}


def zh_session() -> list[Message]:
    """System, a zh task, eight tool calls with zh outputs (0.2k-30k chars), a zh answer."""
    steps = [
        ("tail -n 400 logs/order.log", log_output(400)),
        ("cat docs/设计说明.md", doc_output(40)),
        ("pytest tests/test_refund.py -q", pytest_output(25)),
        ("grep -rn 签名校验 src/", "src/pay/callback.py:88: # 签名校验：按字典序拼接参数\n" * 12),
        ("cat src/order/state_machine.py | head -5", "状态 = [待支付, 已支付, 已取消]\n"),
        ("tail -n 1200 logs/order.log", log_output(1200)),
        ("pytest -q", pytest_output(60)),
        ("git diff --stat", " src/order/state_machine.py | 12 ++++++------\n 1 个文件修改\n"),
    ]
    msgs: list[Message] = [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": "退款测试一直失败：请找出订单状态机的问题并修复，然后跑一遍测试。",
        },
    ]
    for i, (cmd, out) in enumerate(steps, start=1):
        msgs.append(_call(i, cmd))
        msgs.append(_result(i, out))
    msgs.append(
        {"role": "assistant", "content": "已修复：退款审核通过后状态改为“已退款”，全部测试通过。"}
    )
    return msgs

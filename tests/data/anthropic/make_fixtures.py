"""Writes the hand-made Anthropic fixtures in this folder (run it from anywhere; the output is
committed, so tests never run it). Lines are written as literal JSON text on purpose: spacing,
``\\u`` escapes, a lone surrogate, a 30-digit integer, CRLF and a missing final newline must
reach the tests exactly as written here. The expected counts are in
tests/test_format_anthropic.py.
"""

import base64
import io
from pathlib import Path

from PIL import Image

HERE = Path(__file__).resolve().parent


def png(size, colour) -> str:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def image(data: str) -> str:
    return '{"type":"image","source":{"type":"base64","media_type":"image/png","data":"' + data + '"}}'


RED = png((4, 3), (200, 30, 30))
GREEN = png((3, 3), (30, 200, 30))
BLUE = png((2, 2), (30, 30, 200))
SIG = "EqQBCkgIBxABGAIiQL1Yx3jv6B0Q0w1n1c8R0W2gk4b7zKXkqOq2uXlq2R7m3Yw5h6nZcH0s1v8m1Qm9a8Xh2b3c4d5e6f7g8h9i0j=="


def write(name: str, lines: list[str]) -> None:
    (HERE / name).write_bytes("".join(lines).encode("utf-8"))


# Layout (a): one message per line; response lines are assistant messages with usage.
write("lines.jsonl", [
    '{"role":"user","content":"Look at the two screenshots and fix the failing test."}\n',
    '{"role":"assistant","content":[{"type":"thinking","thinking":"Run the tests and open both screenshots at once.","signature":"' + SIG + '"},'
    '{"type":"text","text":"Running the tests and opening the screenshots."},'
    '{"type":"tool_use","id":"toolu_01","name":"bash","input":{"command":"pytest -q"}},'
    '{"type":"tool_use","id":"toolu_02","name":"view_image","input":{"path":"shot1.png"}},'
    '{"type":"tool_use","id":"toolu_03","name":"view_image","input":{"path":"shot2.png"}}]}\n',
    '{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_03","content":[' + image(GREEN) + ']},'
    '{"type":"tool_result","tool_use_id":"toolu_01","content":"1 failed: test_add (assert 4 == 3)","is_error":true},'
    '{"type":"tool_result","tool_use_id":"toolu_02","content":[{"type":"text","text":"shot1.png, 4x3"},' + image(RED) + ']}]}\n',
    'this line is not JSON\n',
    '{"role":"assistant","content":[{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},'
    '{"type":"text","text":"The test expects 3 but add returns 4."},'
    '{"type":"tool_use","id":"toolu_04","name":"edit","input":{"path":"calc.py","old":"a + b + 1","new":"a + b"}}],'
    '"x_unknown": 123456789012345678901234567890}\n',
    '{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_04","content":[{"type":"text","text":"edited calc.py"}]}]}\r\n',
    '{"type":"lookout-test-unknown","payload":{"n":1}}\n',
    '{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Fixed: add no longer adds one. caf\\u00e9"}],'
    '"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":50,"cache_creation_input_tokens":2000,"cache_read_input_tokens":8000,"output_tokens":120,'
    '"cache_creation":{"ephemeral_5m_input_tokens":1500,"ephemeral_1h_input_tokens":500}}}\n',
    '{"role":"user","content":[{"type":"text","text":"Here is the new screenshot \\ud800"},' + image(BLUE) + ']}\n',
    '{"id":"msg_02","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Looks right now."}],'
    '"stop_reason":"end_turn","usage":{"input_tokens":30,"cache_creation_input_tokens":0,"cache_read_input_tokens":10000,"output_tokens":8}}',
])

SYSTEM = '[{"type":"text","text":"You are a coding agent.","cache_control":{"type":"ephemeral"}}]'
TOOLS = ('[{"name":"bash","description":"Run a shell command","input_schema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}},'
         '{"name":"read","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}]')
U1 = '{"role":"user","content":"Run the tests and read calc.py"}'
A1 = ('{"role":"assistant","content":[{"type":"thinking","thinking":"Both at once.","signature":"' + SIG + '"},'
      '{"type":"tool_use","id":"toolu_a","name":"bash","input":{"command":"pytest"}},'
      '{"type":"tool_use","id":"toolu_b","name":"read","input":{"path":"calc.py"}}]}')
U2 = ('{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_b","content":"def add(a, b):\\n    return a + b + 1\\n"},'
      '{"type":"tool_result","tool_use_id":"toolu_a","content":"FAILED test_add","is_error":true}]}')
A2 = '{"role":"assistant","content":[{"type":"text","text":"add() adds one too many."}]}'
U3 = '{"role":"user","content":[{"type":"text","text":"This is the CI screenshot."},' + image(RED) + ']}'
A3 = '{"role":"assistant","content":"I see the red CI badge."}'
U4 = '{"role":"user","content":"Fix it, then run the tests again."}'
USAGE1 = '{"input_tokens":400,"cache_creation_input_tokens":1200,"cache_read_input_tokens":0,"output_tokens":60}'
USAGE2 = '{"input_tokens":25,"cache_creation_input_tokens":300,"cache_read_input_tokens":1600,"output_tokens":90,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":300}}'

# Layout (b): one request body per line (system, tools, max_tokens); the last body is the context.
write("bodies.jsonl", [
    '{"model":"claude-sonnet-4-5","max_tokens":4096,"system":' + SYSTEM + ',"tools":' + TOOLS + ',"messages":[' + U1 + ']}\n',
    '{"id":"msg_a","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":' + A1[A1.index("["):-1] + ',"stop_reason":"tool_use","usage":' + USAGE1 + '}\n',
    '{"model":"claude-sonnet-4-5","max_tokens":4096,"system":' + SYSTEM + ',"tools":' + TOOLS + ',"messages":[' + ",".join([U1, A1, U2, A2, U3, A3, U4]) + '],"metadata":{"user_id":"u-123"}}\n',
    '{"id":"msg_b","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Fixed."}],"stop_reason":"end_turn","usage":' + USAGE2 + '}\n',
])

# A transcript lookout compacted earlier (layout a): a setup block and the summary merged into
# the first kept user message, and a server-side compaction block.
write("compacted.jsonl", [
    '{"role":"user","content":[{"type":"text","text":"[lookout:memory]\\n- prefers pytest"},'
    '{"type":"text","text":"Summary of the earlier conversation (written by lookout compact):\\n\\nGoal: fix calc.py.\\n\\n'
    '[lookout compaction, manual: 90,000 → 4,000 tokens] lookout-restore:' + "cd" * 32 + '"},'
    '{"type":"text","text":"Now add a test for subtraction."}]}\n',
    '{"role":"assistant","content":[{"type":"compaction","content":"Earlier: the user asked for tests.","encrypted_content":"Zm9vYmFy"},{"type":"text","text":"Adding test_sub."}]}\n',
    '{"role":"user","content":"Thanks"}\n',
])

"""Writes the hand-made OpenAI fixtures in this folder (run it from anywhere; the output is
committed, so tests never run it). Lines are written as literal JSON text on purpose: spacing,
``\\u`` escapes, a lone surrogate, a 30-digit integer, CRLF and a missing final newline must
reach the tests exactly as written here. The expected counts are in tests/test_format_openai.py.
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


RED = png((4, 3), (200, 30, 30))
BLUE = png((2, 2), (30, 30, 200))


def write(name: str, lines: list[str]) -> None:
    (HERE / name).write_bytes("".join(lines).encode("utf-8"))


# Layout (a): one message per line, a fine-tuning style {"messages":[...]} line, two responses.
write("lines.jsonl", [
    '{"role":"developer","content":"You are a careful coding agent. Answer briefly."}\n',
    '{"role":"user","content":"Read setup.py and README.md, then tell me what the project is."}\n',
    '{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"read_file","arguments":"{\\"path\\":\\"setup.py\\"}"}},{"id":"call_b","type":"function","function":{"name":"read_file","arguments":"{\\"path\\":\\"README.md\\"}"}}]}\n',
    '{"role":"tool","tool_call_id":"call_b","content":"# Demo\\nA demo project.\\n"}\n',
    '{"role":"tool","tool_call_id":"call_a","content":[{"type":"text","text":"from setuptools import setup\\nsetup(name=\\"demo\\")\\n"}]}\n',
    'this line is not JSON\n',
    '{"type":"lookout-test-unknown","payload":{"big":123456789012345678901234567890}}\n',
    '{"role":"assistant", "content": "It is a demo package.", "x_unknown_field": {"n": 123456789012345678901234567890}}\n',
    '{"role":"user","content":[{"type":"text","text":"What is in this picture? caf\\u00e9 \\ud800"},'
    '{"type":"image_url","image_url":{"url":"data:image/png;base64,' + RED + '","detail":"low"}}]}\n',
    '{"role":"assistant","content":[{"type":"refusal","refusal":"I cannot say who drew it."}]}\r\n',
    '{"messages":[{"role":"user","content":"Fetch https://example.com/logo.png"},'
    '{"role":"assistant","content":null,"tool_calls":[{"id":"call_c","type":"function","function":{"name":"fetch","arguments":"{\\"url\\":\\"https://example.com/logo.png\\"}"}}]},'
    '{"role":"tool","tool_call_id":"call_c","content":"saved to logo.png"}]}\n',
    '{"id":"chatcmpl-1","object":"chat.completion","created":1767225600,"model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"Saved the logo.","refusal":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":1200,"completion_tokens":20,"total_tokens":1220,"prompt_tokens_details":{"cached_tokens":1024}}}\n',
    '{"role":"user","content":[{"type":"text","text":"Compare it with this one."},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}},'
    '{"type":"image_url","image_url":{"url":"data:image/png;base64,' + BLUE + '"}}]}\n',
    '{"id":"chatcmpl-2","object":"chat.completion","created":1767225660,"model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"They match."},"finish_reason":"stop"}],"usage":{"prompt_tokens":1500,"completion_tokens":5,"total_tokens":1505,"prompt_tokens_details":{"cached_tokens":1200}}}',
])

TOOLS = ('[{"type":"function","function":{"name":"ls","description":"List a folder",'
         '"parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}},'
         '{"type":"function","function":{"name":"cat","description":"Print a file",'
         '"parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}]')
SYSTEM = '{"role":"system","content":"You are a shell assistant."}'
U1 = '{"role":"user","content":"List src and show main.py"}'
A1 = ('{"role":"assistant","content":null,"tool_calls":['
      '{"id":"call_1","type":"function","function":{"name":"ls","arguments":"{\\"path\\":\\"src\\"}"}},'
      '{"id":"call_2","type":"function","function":{"name":"cat","arguments":"{\\"path\\":\\"src/main.py\\"}"}}]}')
T2 = '{"role":"tool","tool_call_id":"call_2","content":"print(\\"hi\\")\\n"}'
T1 = '{"role":"tool","tool_call_id":"call_1","content":"main.py\\nutil.py\\n"}'
U2 = ('{"role":"user","content":[{"type":"text","text":"And this diagram?"},'
      '{"type":"image_url","image_url":{"url":"data:image/png;base64,' + RED + '"}}]}')
A2 = '{"role":"assistant","content":"A red rectangle."}'
U3 = '{"role":"user","content":"Thanks. Now write the summary."}'

# Layout (b): one request body per line; the last body is the context.
write("bodies.jsonl", [
    '{"model":"gpt-4.1","messages":[' + SYSTEM + ',' + U1 + '],"tools":' + TOOLS + '}\n',
    '{"id":"chatcmpl-9","object":"chat.completion","created":1767225600,"model":"gpt-4.1","choices":[{"index":0,"message":' + A1 + ',"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":500,"completion_tokens":12,"total_tokens":512}}\n',
    '{"model":"gpt-4.1","messages":[' + ",".join([SYSTEM, U1, A1, T2, T1, U2, A2, U3]) + '],"tools":' + TOOLS + ',"temperature":0.2}\n',
    '{"id":"chatcmpl-10","object":"chat.completion","created":1767225720,"model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"Summary: ..."},"finish_reason":"stop"}],"usage":{"prompt_tokens":900,"completion_tokens":40,"total_tokens":940,"prompt_tokens_details":{"cached_tokens":512,"cache_write_tokens":100}}}\n',
    '{"type":"lookout-test-unknown","note":"a line the adapter does not know"}\n',
])

# A transcript lookout compacted earlier (layout a): setup, a summary, the kept tail.
write("compacted.jsonl", [
    '{"role":"system","content":"You are a shell assistant."}\n',
    '{"role":"system","content":"[lookout:memory]\\n- The user prefers short answers."}\n',
    '{"role":"user","content":"Summary of the earlier conversation (written by lookout compact):\\n\\n'
    'Goal: tidy src/. Done: listed src/, read main.py.\\n\\n'
    '[lookout compaction, auto: 150,000 → 12,000 tokens] lookout-restore:' + "ab" * 32 + '"}\n',
    U3 + '\n',
    '{"role":"assistant","content":"Here is the summary."}\n',
])

"""Writes openai-image.jsonl in this folder (committed; tests never run this). The image is a
100x60 PNG, so its token cost is worked out by hand in tests/test_measure.py: Anthropic
100*60/750 = 8; OpenAI one 512-px tile, 85 + 170 = 255. claude-small.jsonl is hand-written."""

import base64
import io
from pathlib import Path

from PIL import Image

HERE = Path(__file__).resolve().parent

buf = io.BytesIO()
Image.new("RGB", (100, 60), (30, 120, 200)).save(buf, format="PNG")
data = base64.b64encode(buf.getvalue()).decode()
lines = [
    '{"role":"system","content":"You are helpful."}\n',
    '{"role":"user","content":[{"type":"text","text":"hello world"},'
    '{"type":"image_url","image_url":{"url":"data:image/png;base64,' + data + '"}}]}\n',
    '{"role":"assistant","content":"yes"}\n',
]
(HERE / "openai-image.jsonl").write_bytes("".join(lines).encode())

"""clear-images: the budget and keep rules, every image home in every format, restore, repair."""

from __future__ import annotations

import base64
import io
import os

import orjson
import pytest
from conftest import run_lookout
from PIL import Image

from lookout_cli.core.jsonl import read_records
from lookout_cli.formats import Transcript, detect
from lookout_cli.formats.view import IMAGE

FORMATS = ["claude-code", "codex", "openai", "anthropic"]


def make_image(kind: str, size: tuple[int, int] = (600, 400), seed: int = 0) -> tuple[bytes, str]:
    """A real image made with pillow: a patch of noise, so the bytes are not tiny and no two are
    alike, on a canvas large enough to cost more tokens than a placeholder (clear-images keeps
    smaller images)."""
    patch = (min(size[0], 64), min(size[1], 48))
    image = Image.new("RGB", size)
    image.paste(Image.frombytes("RGB", patch, os.urandom(patch[0] * patch[1] * 3) if seed else
                                bytes((x * 7 + seed) % 256 for x in range(patch[0] * patch[1] * 3))))
    fmt = {"png": "PNG", "jpeg": "JPEG", "webp": "WEBP", "gif": "GIF"}[kind]
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue(), f"image/{kind}"


class Builder:
    """Writes a small transcript of one format: prompts with images, replies, tool reads."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.lines: list[dict] = []
        self.n = 0
        self.parent = None
        if fmt == "codex":
            self.lines.append({"timestamp": "2026-11-01T10:00:00.000Z", "type": "session_meta",
                               "payload": {"id": "s1", "cwd": "/w", "cli_version": "0.58.0"}})

    def _claude(self, kind: str, message: dict, **extra) -> None:
        self.n += 1
        uuid = f"u{self.n}"
        self.lines.append({"parentUuid": self.parent, "isSidechain": False, "userType": "external", "cwd": "/w",
                           "sessionId": "s1", "version": "2.1.0", "type": kind, "message": message, "uuid": uuid,
                           "timestamp": f"2026-11-01T10:{self.n:02d}:00.000Z", **extra})
        self.parent = uuid

    def _codex(self, payload: dict) -> None:
        self.n += 1
        self.lines.append({"timestamp": f"2026-11-01T10:{self.n:02d}:00.000Z", "type": "response_item",
                           "payload": payload})

    def prompt(self, text: str, images: list[tuple[bytes, str]] = ()) -> None:
        data = [(base64.b64encode(b).decode(), mt) for b, mt in images]
        if self.fmt == "claude-code":
            blocks = [{"type": "image", "source": {"type": "base64", "media_type": mt, "data": d}} for d, mt in data]
            self._claude("user", {"role": "user", "content": [*blocks, {"type": "text", "text": text}]})
        elif self.fmt == "anthropic":
            blocks = [{"type": "image", "source": {"type": "base64", "media_type": mt, "data": d}} for d, mt in data]
            self.lines.append({"role": "user", "content": [*blocks, {"type": "text", "text": text}]})
        elif self.fmt == "openai":
            parts = [{"type": "image_url", "image_url": {"url": f"data:{mt};base64,{d}"}} for d, mt in data]
            self.lines.append({"role": "user", "content": [{"type": "text", "text": text}, *parts]})
        else:
            parts = [{"type": "input_image", "image_url": f"data:{mt};base64,{d}"} for d, mt in data]
            self._codex({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}, *parts]})

    def reply(self, text: str) -> None:
        if self.fmt == "claude-code":
            self.n += 0
            self._claude("assistant", {"id": f"msg_{self.n}", "type": "message", "role": "assistant",
                                       "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": text}],
                                       "usage": {"input_tokens": 5, "output_tokens": 5}})
        elif self.fmt in ("anthropic", "openai"):
            self.lines.append({"role": "assistant", "content": text})
        else:
            self._codex({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]})

    def read_image(self, path: str, image: tuple[bytes, str]) -> None:
        """A tool call that reads an image, and its result carrying it (Claude keeps two copies)."""
        data, mt = base64.b64encode(image[0]).decode(), image[1]
        call_id = f"call_{self.n}"
        if self.fmt == "claude-code":
            self._claude("assistant", {"id": f"msg_r{self.n}", "type": "message", "role": "assistant",
                                       "model": "claude-sonnet-4-5",
                                       "content": [{"type": "tool_use", "id": call_id, "name": "Read",
                                                    "input": {"file_path": path}}],
                                       "usage": {"input_tokens": 5, "output_tokens": 5}})
            self._claude("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": [
                {"type": "image", "source": {"type": "base64", "media_type": mt, "data": data}}]}]},
                toolUseResult={"type": "image", "file": {"base64": data, "type": mt, "originalSize": len(image[0])}})
        elif self.fmt == "anthropic":
            self.lines.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": call_id, "name": "Read", "input": {"file_path": path}}]})
            self.lines.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": [
                {"type": "image", "source": {"type": "base64", "media_type": mt, "data": data}}]}]})
        else:
            pytest.skip(f"{self.fmt} tool results carrying images are covered by the adapter tests")

    def bytes(self) -> bytes:
        return b"".join(orjson.dumps(line) + b"\n" for line in self.lines)


def images_in(data: bytes) -> list:
    records = list(read_records(io.BytesIO(data)))
    transcript = Transcript(records, detect(records))
    return [i for i in transcript.view().items if i.kind == IMAGE and i.image and i.image.data]


def run_clear(data: bytes, *args: str):
    result = run_lookout("clear-images", *args, input=data)
    assert result.returncode == 0, result.stderr.decode()
    return result


def chat_with_images(fmt: str, count: int, kind: str = "png") -> tuple[bytes, list[bytes]]:
    builder = Builder(fmt)
    originals = []
    for n in range(count):
        image = make_image(kind, seed=n + 1)
        originals.append(image[0])
        builder.prompt(f"look at picture {n}", [image])
        builder.reply(f"I see picture {n}")
    builder.prompt("and now?")
    return builder.bytes(), originals


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", ["png", "jpeg", "webp", "gif"])
def test_budget_clears_oldest_seen_until_half_and_keeps_five(fmt, kind, tmp_path):
    data, originals = chat_with_images(fmt, 9, kind)
    sizes = [len(base64.b64encode(o)) for o in originals]
    budget = sum(sizes) - 1  # just over budget
    out = run_clear(data, "--budget", str(budget)).stdout
    left = images_in(out)
    # oldest first until the request carries at most half the budget, never the five newest
    expected_cleared, carried = 0, sum(sizes)
    for size in sizes[:-5]:
        if carried <= budget // 2:
            break
        carried -= size
        expected_cleared += 1
    assert len(left) == 9 - expected_cleared
    kept_data = {i.image.data for i in left}
    for n, original in enumerate(originals):
        assert (base64.b64encode(original).decode() in kept_data) == (n >= expected_cleared)
    assert b"lookout cleared image" in out
    # restore gives the original bytes back; a second run changes nothing
    assert run_lookout("restore", input=out).stdout == data
    assert run_clear(out, "--budget", str(budget)).stdout == out


@pytest.mark.parametrize("fmt", FORMATS)
def test_under_budget_changes_nothing(fmt):
    data, _ = chat_with_images(fmt, 7)
    assert run_clear(data).stdout == data  # default budget is megabytes


@pytest.mark.parametrize("fmt", FORMATS)
def test_fewer_than_five_images_all_stay(fmt):
    data, _ = chat_with_images(fmt, 4)
    assert run_clear(data, "--budget", "10").stdout == data


@pytest.mark.parametrize("fmt", FORMATS)
def test_current_request_images_stay_even_alone_over_budget(fmt):
    builder = Builder(fmt)
    for n in range(7):
        builder.prompt(f"old {n}", [make_image("png", seed=n + 1)])
        builder.reply("seen")
    current = [make_image("png", (200, 200), seed=99), make_image("png", (200, 200), seed=98)]
    builder.prompt("these two are new", current)
    data = builder.bytes()
    budget = len(base64.b64encode(current[0][0]))  # the current request alone is over it
    out = run_clear(data, "--budget", str(budget), "--keep-recent", "0").stdout
    left = {i.image.data for i in images_in(out)}
    assert {base64.b64encode(c[0]).decode() for c in current} <= left
    assert len(left) == 2  # every old, seen image went


@pytest.mark.parametrize("fmt", ["claude-code", "anthropic"])
def test_images_only_in_tool_results(fmt):
    builder = Builder(fmt)
    builder.prompt("read the screenshots")
    originals = []
    for n in range(8):
        image = make_image("png", seed=n + 1)
        originals.append(image[0])
        builder.read_image(f"/w/shot{n}.png", image)
    builder.reply("done reading")
    builder.prompt("thanks")
    data = builder.bytes()
    out = run_clear(data, "--budget", "1000", "--keep-recent", "2").stdout
    left = images_in(out)
    assert 0 < len(left) < 8
    assert b"/w/shot0.png" in out  # the placeholder names the file the tool read
    if fmt == "claude-code":
        # both copies go: no cleared image's base64 is left anywhere on its line
        for original in originals[: 8 - len(left)]:
            assert base64.b64encode(original) not in out
    assert run_lookout("restore", input=out).stdout == data
    # calls and results stay paired
    records = list(read_records(io.BytesIO(out)))
    assert Transcript(records, detect(records)).view().orphans() == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_repair_shrinks_an_image_over_the_provider_limit(fmt, tmp_path):
    wide, mt = make_image("png", (8200, 40), seed=1)
    builder = Builder(fmt)
    builder.prompt("a very wide image", [(wide, mt)])
    builder.reply("ok")
    builder.prompt("next")
    data = builder.bytes()
    result = run_clear(data, "--repair", "--provider", "anthropic")
    assert b"repaired" in result.stderr
    (left,) = images_in(result.stdout)
    fixed = Image.open(io.BytesIO(base64.b64decode(left.image.data)))
    fixed.load()
    assert max(fixed.size) <= 8000 and fixed.size[0] / fixed.size[1] == pytest.approx(8200 / 40, rel=0.05)
    assert run_clear(result.stdout, "--repair", "--provider", "anthropic").stdout == result.stdout


def test_repair_clears_an_image_that_is_not_an_image():
    builder = Builder("anthropic")
    builder.prompt("broken", [(b"not an image at all" * 10, "image/png")])
    builder.reply("ok")
    builder.prompt("next")
    result = run_clear(builder.bytes(), "--repair")
    assert images_in(result.stdout) == []
    assert b"lookout cleared image" in result.stdout
    assert run_lookout("restore", input=result.stdout).stdout == builder.bytes()


def test_dry_run_and_check_write_nothing(tmp_path):
    data, _ = chat_with_images("anthropic", 9)
    env = dict(os.environ, LOOKOUT_SAVE_DIR=str(tmp_path / "saved"))
    dry = run_lookout("clear-images", "--budget", "100", "--dry-run", input=data, env=env)
    assert dry.returncode == 0 and dry.stdout == data and b"would clear" in dry.stderr
    assert not (tmp_path / "saved").exists()
    check = run_lookout("clear-images", "--budget", "100", "--check", input=data, env=env)
    assert check.returncode == 1 and check.stdout == data

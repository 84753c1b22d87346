"""Token counting: shipped rank files, offline, equal to tiktoken's own counts."""

from __future__ import annotations

import gzip
import hashlib
import inspect
import json
import statistics
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import pytest

from lookout_cli.core.errors import LookoutError
from lookout_cli.tokens import tokenizer as tokens

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"

SAMPLES = [
    "",
    "Hello, world! The quick brown fox jumps over the lazy dog.",
    "def f(x):\n    return {k: v for k, v in x.items() if v is not None}\n\n\tprint('done')\n",
    json.dumps({"type": "tool_use", "id": "toolu_01A", "input": {"path": "/src/app.ts", "n": 12345}}),
    json.dumps({"a": [1, 2, 3], "b": {"c": None, "d": True}}, indent=2),
    "naïve café — “quotes”, 日本語のテキスト, 中文文本, 한국어, Ελληνικά, русский текст, עברית, 👩‍💻🚀✨",
    "a\u0301 e\u0308 combining marks and ZWJ\u200d here",
    "The model said <|endoftext|> and then <|fim_prefix|>x<|fim_middle|>y<|fim_suffix|> <|endofprompt|>",
    "   leading spaces\n\n\n\r\n\ttabs\t\tand trailing   \n",
    "0123456789 3.14159 1e-10 0xdeadbeef 2026-11-29T17:35:00Z 550e8400-e29b-41d4-a716-446655440000",
    "x" * 5000,
    "lone surrogate \ud800 inside",
]


def _local_texts() -> list[str]:
    """Real files of several kinds from this machine, for bulk comparisons."""
    import email.message
    import json as json_mod

    import tiktoken

    texts = [
        inspect.getsource(json_mod),
        inspect.getsource(email.message),
        inspect.getsource(tiktoken.core),
        (REPO / "lookout_cli" / "data" / "LICENSE-tiktoken.txt").read_text(),
    ]
    spec = SHARED / "SPEC.md"
    if spec.exists():
        texts.append(spec.read_text())
    return texts


# --- the constants are tiktoken's ---------------------------------------------------------


def _openai_public_defs(monkeypatch) -> dict[str, dict]:
    """tiktoken_ext.openai_public's constructor results, with the download stubbed out."""
    import tiktoken_ext.openai_public as op

    seen: dict[str, tuple[str, str]] = {}

    def fake_load(url, expected_hash=None):
        seen["last"] = (url, expected_hash)
        return {}

    monkeypatch.setattr(op, "load_tiktoken_bpe", fake_load)
    out = {}
    for name in ("o200k_base", "cl100k_base"):
        d = getattr(op, name)()
        d["url"], d["expected_hash"] = seen["last"]
        out[name] = d
    return out


def test_patterns_specials_and_hashes_are_tiktokens(monkeypatch):
    defs = _openai_public_defs(monkeypatch)
    for name, spec in tokens.ENCODINGS.items():
        d = defs[name]
        assert spec.pat_str == d["pat_str"], name
        assert spec.special_tokens == d["special_tokens"], name
        assert spec.sha256 == d["expected_hash"], name
        assert spec.url == d["url"], name


def test_shipped_files_decompress_to_the_pinned_hash():
    from importlib import resources

    for spec in tokens.ENCODINGS.values():
        raw = (resources.files("lookout_cli.data") / spec.filename).read_bytes()
        assert hashlib.sha256(gzip.decompress(raw)).hexdigest() == spec.sha256
    assert (REPO / "lookout_cli" / "data" / "LICENSE-tiktoken.txt").read_text().count("MIT License")


def test_fast_rank_parse_equals_tiktokens_parse():
    # read_ranks takes each rank from the line number; tiktoken parses the number.
    import base64
    from importlib import resources

    for name, spec in tokens.ENCODINGS.items():
        data = gzip.decompress((resources.files("lookout_cli.data") / spec.filename).read_bytes())
        ref = {}
        for line in data.splitlines():
            if line:
                token, rank = line.split()
                ref[base64.b64decode(token)] = int(rank)
        assert tokens.read_ranks(name) == ref, name


# --- equal to tiktoken, with the network unreachable ---------------------------------------

_SITECUSTOMIZE = '''
import socket

def _blocked(*args, **kwargs):
    raise OSError("network disabled by lookout's test")

socket.socket.connect = _blocked
socket.socket.connect_ex = _blocked
socket.getaddrinfo = _blocked
socket.create_connection = _blocked
'''

_CHILD = '''
import json, os, sys
import tiktoken

# The block works: an encoding absent from the cache must fail to download.
os.environ["TIKTOKEN_CACHE_DIR"] = sys.argv[2]
try:
    tiktoken.get_encoding("r50k_base")
    blocked = False
except Exception:
    blocked = True
os.environ["TIKTOKEN_CACHE_DIR"] = sys.argv[1]

from lookout_cli.tokens import tokenizer as tokens

texts = json.loads(open(sys.argv[3], encoding="utf-8", errors="surrogatepass").read())
result = {"blocked": blocked}
for name in ("o200k_base", "cl100k_base"):
    ref = tiktoken.get_encoding(name)
    result[name] = {
        "tiktoken": [len(ref.encode_ordinary(t)) for t in texts],
        "ours": [tokens.count(t, name) for t in texts],
        "many": tokens.count_many(texts, name),
        "counter": [tokens.TokenCounter(name).count(t) for t in texts],
    }
print(json.dumps(result))
'''


def test_counts_equal_tiktoken_offline(tmp_path):
    # tiktoken looks for sha1(url) in TIKTOKEN_CACHE_DIR before downloading; seed it with our
    # decompressed files so tiktoken's own get_encoding works with the network blocked.
    cache = tmp_path / "cache"
    cache.mkdir()
    empty = tmp_path / "empty"
    empty.mkdir()
    for name, spec in tokens.ENCODINGS.items():
        data = gzip.decompress((REPO / "lookout_cli" / "data" / spec.filename).read_bytes())
        (cache / hashlib.sha1(spec.url.encode()).hexdigest()).write_bytes(data)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    child = tmp_path / "child.py"
    child.write_text(_CHILD)
    texts = SAMPLES + _local_texts()
    texts_file = tmp_path / "texts.json"
    texts_file.write_text(json.dumps(texts), encoding="utf-8")
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, str(child), str(cache), str(empty), str(texts_file)],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["blocked"], "the socket block did not stop tiktoken's download"
    for name in ("o200k_base", "cl100k_base"):
        r = result[name]
        assert r["ours"] == r["tiktoken"], name
        assert r["many"] == r["tiktoken"], name
        assert r["counter"] == r["tiktoken"], name
    # The special-token text really is counted as text, not refused.
    eot = SAMPLES.index(next(s for s in SAMPLES if "<|endoftext|>" in s))
    assert result["o200k_base"]["ours"][eot] > 10


def test_plain_encode_would_refuse_special_token_text():
    enc = tokens.get_encoding("o200k_base")
    with pytest.raises(ValueError):
        enc.encode("say <|endoftext|>")
    assert tokens.count("say <|endoftext|>") == len(enc.encode_ordinary("say <|endoftext|>"))


def test_exact_length_reads_the_count_off_a_buffer_and_distrusts_one_that_disagrees(monkeypatch):
    enc = tokens.get_encoding("o200k_base")
    length = tokens.exact_length("o200k_base")
    assert length.__name__ == "buffered"  # this tiktoken's buffer call passed the probes
    for text in SAMPLES[1:]:  # special-token text as text, a lone surrogate replaced
        assert length(text) == len(enc.encode_ordinary(text)), text

    class Core:  # another tiktoken's core: its buffer call does not encode as encode_ordinary
        def __init__(self, core, buffer):
            self.encode_ordinary = core.encode_ordinary
            if buffer:
                self.encode_to_tiktoken_buffer = lambda text, allowed: core.encode_to_tiktoken_buffer(text + "!", allowed)

    for buffer in (True, False):
        monkeypatch.setattr(enc, "_core_bpe", Core(enc._core_bpe, buffer))
        monkeypatch.setattr(tokens, "_lengths", {})
        assert tokens.exact_length("o200k_base").__name__ == "listed"
        assert tokens.count(SAMPLES[1]) == length(SAMPLES[1])


# --- integrity ------------------------------------------------------------------------------


def test_corrupted_rank_file_is_rejected():
    from importlib import resources

    spec = tokens.ENCODINGS["cl100k_base"]
    data = bytearray(gzip.decompress((resources.files("lookout_cli.data") / spec.filename).read_bytes()))
    data[1000] ^= 0x01  # one flipped bit in a token
    with pytest.raises(LookoutError, match=r"cl100k_base\.tiktoken\.gz is corrupted: sha256 [0-9a-f]{64} does not match"):
        tokens.read_ranks("cl100k_base", gzip.compress(bytes(data)))


def test_truncated_or_non_gzip_rank_file_is_rejected():
    from importlib import resources

    raw = (resources.files("lookout_cli.data") / "o200k_base.tiktoken.gz").read_bytes()
    with pytest.raises(LookoutError, match="corrupted"):
        tokens.read_ranks("o200k_base", raw[: len(raw) // 2])
    with pytest.raises(LookoutError, match="corrupted"):
        tokens.read_ranks("o200k_base", b"not gzip at all")


def test_the_rank_table_is_kept_in_the_cache_folder_and_a_damaged_copy_is_replaced():
    path = Path(tokens.ranks_cache_path("cl100k_base"))
    shipped = tokens.read_ranks("cl100k_base")
    path.unlink(missing_ok=True)  # a link to the suite's copy (conftest): never written through
    assert tokens.cached_ranks("cl100k_base") == shipped  # decoded from the package, then kept
    blob = path.read_bytes()
    assert zlib.crc32(blob[4:]).to_bytes(4, "little") == blob[:4]  # (fsutil.Seal)
    path.write_bytes(blob[:4] + b"\x00" + blob[5:])  # one changed byte: its seal no longer fits
    assert tokens.cached_ranks("cl100k_base") == shipped
    assert path.read_bytes() == blob  # rewritten whole
    path.write_bytes(b"")  # a torn copy
    assert tokens.cached_ranks("cl100k_base") == shipped and path.read_bytes() == blob


def test_unknown_encoding_is_a_clear_error():
    with pytest.raises(LookoutError, match="unknown encoding 'p50k_base'"):
        tokens.count("x", "p50k_base")
    with pytest.raises(LookoutError, match="unknown encoding"):
        tokens.TokenCounter("gpt2")


def test_encoding_is_built_directly_never_via_get_encoding():
    src = inspect.getsource(tokens)
    # Both would download rank files; lookout builds tiktoken.Encoding itself.
    assert "tiktoken.get_encoding" not in src
    assert "tiktoken.encoding_for_model" not in src
    assert "tiktoken.Encoding(" in src


def test_nothing_loads_tiktoken_until_a_real_count(tmp_path):
    code = textwrap.dedent(
        """
        import sys
        from lookout_cli.tokens import tokenizer as tokens
        from lookout_cli.tokens import models
        from lookout_cli.tokens import budget
        from lookout_cli.images import probe as images
        assert tokens.estimate("some text") > 0
        c = tokens.TokenCounter(exact=False)
        assert c.count("x" * 100) > 0 and not c.exact
        assert tokens.encoding_for_model("gpt-4") == "cl100k_base"
        budget.Budget.from_settings(models.lookup("claude-sonnet-4-5"))
        print("tiktoken" in sys.modules, tokens.is_loaded())
        tokens.count("now")
        print("tiktoken" in sys.modules, tokens.is_loaded())
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["False False", "True True"]


# --- API ------------------------------------------------------------------------------------


def test_count_many_matches_count_and_handles_empties():
    texts = ["", "abc", "", "def ghi"]
    assert tokens.count_many(texts) == [tokens.count(t) for t in texts]
    assert tokens.count_many(["", ""]) == [0, 0]
    assert tokens.count_many([]) == []
    assert tokens.count_many(iter(["one two"]), "cl100k_base") == [tokens.count("one two", "cl100k_base")]


def test_token_counter_memoises_by_content():
    c = tokens.TokenCounter("o200k_base")
    long = "a repeated file read\n" * 500
    first = c.count(long)
    again = c.count("".join(["a repeated file read\n"] * 500))  # equal text, another object
    assert first == again == tokens.count(long)
    assert (c.misses, c.hits) == (1, 1)
    c.count("short")
    c.count("short")
    assert (c.misses, c.hits) == (2, 2)
    assert c.count("") == 0 and c.exact
    assert c.label == "o200k_base count"


def test_token_counter_estimate_mode_and_for_model():
    c = tokens.TokenCounter(exact=False)
    text = "estimate me " * 100
    assert c.count(text) == tokens.estimate(text)
    assert not c.exact and c.label == "estimate"
    assert tokens.TokenCounter.for_model("gpt-3.5-turbo").encoding == "cl100k_base"
    assert tokens.TokenCounter.for_model("claude-opus-4-5").encoding == "o200k_base"


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("gpt-4.1", "o200k_base"),
        ("gpt-4.5-preview", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-5.1-codex", "o200k_base"),
        ("openai/gpt-5.2", "o200k_base"),
        ("o1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("codex-mini-latest", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-0613", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("GPT-3.5-Turbo", "cl100k_base"),
        ("azure/gpt-35-turbo", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("claude-sonnet-4-5", "o200k_base"),
        ("gemini-2.5-pro", "o200k_base"),
        (None, "o200k_base"),
        ("", "o200k_base"),
    ],
)
def test_encoding_for_model(model, encoding):
    assert tokens.encoding_for_model(model) == encoding


def test_calibration():
    assert tokens.calibration(1000, 1250) == pytest.approx(1.25)
    assert tokens.calibration(800, 400) == pytest.approx(0.5)
    assert tokens.calibration(0, 100) is None
    assert tokens.calibration(100, 0) is None


# --- estimate ---------------------------------------------------------------------------------


def _blocks(text: str, size: int = 3000) -> list[str]:
    out, i = [], 0
    while i < len(text):
        j = text.find("\n", i + size)
        j = len(text) if j == -1 else j + 1
        out.append(text[i:j])
        i = j
    return out


def _agent_blocks() -> list[str]:
    """Code, JSON, tool-style output and prose blocks, plus the shared transcripts' text."""
    import collections
    import pathlib
    import sysconfig

    lib = pathlib.Path(sysconfig.get_paths()["stdlib"])
    blocks: list[str] = []
    for mod in ("json/decoder.py", "argparse.py", "textwrap.py", "shlex.py"):
        blocks += _blocks((lib / mod).read_text(encoding="utf-8"))
    data = {p.name: {"size": p.stat().st_size, "parts": list(p.parts), "suffix": p.suffix}
            for p in sorted(lib.glob("*.py"))[:150]}
    blocks += _blocks(json.dumps(data, indent=2))
    blocks += _blocks(json.dumps(data))
    listing = "\n".join(
        f"-rw-r--r--  1 root root {p.stat().st_size:>8} Nov 29 17:35 {p.name}" for p in sorted(lib.glob("*.py"))
    )
    blocks += _blocks(listing)
    docs = [m.__doc__ for m in (collections, json, subprocess, inspect, statistics) if m.__doc__]
    blocks += _blocks("\n\n".join(docs))
    for path in sorted((SHARED / "transcripts").rglob("*.jsonl"))[:6]:
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            msg = rec.get("message") if isinstance(rec, dict) else None
            content = msg.get("content") if isinstance(msg, dict) else None
            if isinstance(content, list):
                for part in content:
                    if isinstance(part, dict) and isinstance(part.get("text"), str) and len(part["text"]) > 40:
                        blocks.append(part["text"])
    return [b for b in blocks if b.strip()]


def test_estimate_is_close_to_real_counts_and_beats_chars_over_4():
    blocks = _agent_blocks()
    assert len(blocks) > 40
    real = tokens.count_many(blocks)
    est = [tokens.estimate(b) for b in blocks]
    quarter = [len(b) / 4 for b in blocks]
    total = sum(est) / sum(real)
    err = [abs(e - r) / r for e, r in zip(est, real)]
    err4 = [abs(e - r) / r for e, r in zip(quarter, real)]
    assert 0.9 <= total <= 1.1, total
    assert statistics.median(err) < 0.12, statistics.median(err)
    assert statistics.median(err) < statistics.median(err4)


def test_estimate_looks_for_runs_only_where_one_may_be(monkeypatch):
    """The one-pass look for runs of -=_*#. gives what counting every run everywhere gives."""
    texts = ["a----b", "-=-=-=-=", "--==__**", "....", "x" * 40 + "####", "__init__", "=" * 30 + " ok " + "." * 7,
             "- = _ * # .", "***-***", "no runs at all", "ab" * 100 + "----" + "...." * 3]
    fast = [tokens.estimate(t) for t in texts]
    monkeypatch.setattr(tokens, "_RUN_MARKS", b"R" * 256)  # every text looks as if it had one
    assert [tokens.estimate(t) for t in texts] == fast


def test_estimate_base64_and_edges():
    import base64
    import random

    blob = base64.b64encode(random.Random(7).randbytes(30000)).decode()
    assert tokens.estimate(blob) == pytest.approx(tokens.count(blob), rel=0.1)
    hexrun = hashlib.sha256(b"x").hexdigest() * 10
    assert tokens.estimate(hexrun) == pytest.approx(tokens.count(hexrun), rel=0.2)
    rule = "=" * 30 + " 3 failed, 12 passed in 0.52s " + "=" * 30
    assert tokens.estimate(rule) == pytest.approx(tokens.count(rule), rel=0.5)
    assert tokens.estimate("") == 0
    assert tokens.estimate("a") == 1
    for sentence in (
        "日本語のテキストです。バグを修正しました。",
        "Быстрая коричневая лиса перепрыгивает через ленивую собаку.",
        "敏捷的棕色狐狸跳过了懒惰的狗。这个句子用于测试。",
        "빠른 갈색 여우가 게으른 개를 뛰어넘습니다.",
    ):
        assert tokens.estimate(sentence * 5) == pytest.approx(tokens.count(sentence * 5), rel=0.3), sentence
    assert tokens.estimate("surrogate \ud800") > 0

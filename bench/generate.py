"""A seeded generator of realistic agent transcripts (research/performance.md §2.1, §5).

The text comes only from what the repository owns (its Python sources, README, man pages,
test fixtures), cut into code, JSON tool output, shell output, prose and thinking, plus
PNG images built here from seeded noise. The same seed and the same repository give the
same bytes; every file's sha256 is recorded next to it (``MANIFEST.json``).

Two shapes (``--shape``). ``real``, the default of the command line and the runner, is fitted
to the real sessions in ../shared/transcripts (BENCHMARKS.md has the figures): Claude Code
lines of about 1 KB at the median, 2.5-3 KB at p90 and 1.6-1.8 KB on average, mostly one tool
call a response with short results, thinking in a quarter of the responses, subagents (Task)
writing sidechain lines into the file, an image now and then, and compactions where Claude
Code makes them: when the prompt passes the model's summary point (``SUMMARY_POINT``), a
``compact_boundary`` and its summary start a new segment, as ``/compact`` or the automatic
one writes them (formats.md §1.8; a long session is many segments, and only the last is in
the context); its Codex rollouts compact where Codex does (90% of the window: a ``compacted``
record with the summary, formats.md §2.6). ``generated``, the first shape
(and ``generate()``'s default, which the tests were written against), has long tool outputs
(5 KB lines on average), many progress lines and no subagents.

One abstract session (turns of a prompt, thinking, replies, tool calls and their results,
progress events, now and then an image) is written out in each writable format:
claude-code (split assistant lines sharing ``message.id``, ``toolUseResult`` duplicates,
small ``progress`` lines), codex (a rollout with reasoning, function calls and token_count
events), openai and anthropic (one message per line).

    python -m bench.generate --size 10 --format claude-code --out bench/out
    python -m bench.generate --size 100 --format claude-code --shape generated
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import struct
import sys
import uuid
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORMATS = ("claude-code", "codex", "openai", "anthropic")
MB = 1_000_000
SEED = 20261129
# what a file made from a seed holds: a file the runner made with another version is made again
VERSION = 3  # 2: the real shape compacts; 3: its Codex rollouts too
# where Claude Code compacts a Sonnet 4.5 conversation on its own (a 200k window, less its
# buffer; lookout's catalogue says the same), and what the context holds just after: the
# setup and the summary
SUMMARY_POINT = 167_000
AFTER_COMPACTION = 15_000
# where Codex compacts on its own: 90% of the model's window (research/compaction.md), then
# the setup, the recent prompts (up to about 20k tokens) and the summary (formats.md §2.6)
CODEX_WINDOW = 272_000
CODEX_COMPACT_AT = CODEX_WINDOW * 9 // 10
CODEX_SETUP = 12_000
CODEX_KEPT_PROMPTS = 20_000
CODEX_SUMMARY_PREFIX = ("Another language model started to solve this problem and produced a summary of its "
                        "thinking process. You also have access to the state of the tools that were used by that "
                        "language model. Use this to build on the work that has already been done and avoid "
                        "duplicating work. Here is the summary produced by the other language model, use the "
                        "information in this summary to assist with your own analysis:")


# --- the corpus: text the repository owns ------------------------------------------------

def _repo_files(pattern_dirs: tuple[str, ...], suffixes: tuple[str, ...]) -> list[Path]:
    out = []
    for d in pattern_dirs:
        base = ROOT / d
        if base.is_dir():
            out += sorted(p for p in base.rglob("*") if p.suffix in suffixes and p.is_file()
                          and "out" not in p.relative_to(ROOT).parts)
    return out


class Corpus:
    """Pools of code lines, prose paragraphs and file names, read once from the repo."""

    def __init__(self) -> None:
        code_files = _repo_files(("lookout_cli", "tests", "bench"), (".py",))
        self.code: list[tuple[str, list[str]]] = []
        for p in code_files:
            try:
                lines = p.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                continue
            if lines:
                self.code.append((str(p.relative_to(ROOT)), lines))
        prose = []
        for p in [ROOT / "README.md", *_repo_files(("man", "examples", "integrations"), (".md", ".1", ".txt"))]:
            try:
                text = p.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            prose += [para.strip() for para in text.split("\n\n") if len(para.strip()) > 40
                      and not para.lstrip().startswith("```")]
        # docstrings and comments are prose too
        for _, lines in self.code:
            block = []
            for line in lines:
                s = line.strip()
                if s.startswith("#") and len(s) > 3:
                    block.append(s.lstrip("# "))
                elif block:
                    if len(block) > 1:
                        prose.append(" ".join(block))
                    block = []
        self.prose = prose or ["lookout measures the context of an agent transcript."]
        self.paths = [name for name, _ in self.code]
        self.words = sorted({w for p in self.prose[:400] for w in p.split() if w.isalpha()}) or ["word"]


# --- content makers ----------------------------------------------------------------------

class Maker:
    def __init__(self, rng: random.Random, corpus: Corpus):
        self.r = rng
        self.c = corpus

    def prose(self, lo: int, hi: int) -> str:
        target = self.r.randint(lo, hi)
        out, n = [], 0
        while n < target:
            p = self.r.choice(self.c.prose)
            out.append(p)
            n += len(p) + 2
        return "\n\n".join(out)[:target]

    def code(self, lo_lines: int, hi_lines: int) -> tuple[str, list[str]]:
        name, lines = self.r.choice(self.c.code)
        n = self.r.randint(lo_lines, hi_lines)
        start = self.r.randint(0, max(0, len(lines) - 1))
        chunk = lines[start:start + n]
        while len(chunk) < n and len(self.c.code) > 1:
            chunk += self.r.choice(self.c.code)[1][: n - len(chunk)]
        return name, chunk

    def read_output(self) -> tuple[dict, str]:
        name, chunk = self.code(10, self.r.choice((40, 120, 400, 1200)))
        first = self.r.randint(1, 300)
        text = "\n".join(f"{first + i:6}\u2192{line}" for i, line in enumerate(chunk))
        return {"file_path": "/w/app/" + name}, text

    def json_output(self) -> tuple[dict, str]:
        n = self.r.choice((5, 20, 80, 300))
        rows = []
        for i in range(n):
            rows.append({
                "id": f"{self.r.getrandbits(64):016x}",
                "path": "/w/app/" + self.r.choice(self.c.paths),
                "line": self.r.randint(1, 2000),
                "score": round(self.r.random(), 4),
                "ok": self.r.random() < 0.8,
                "message": " ".join(self.r.choice(self.c.words) for _ in range(self.r.randint(3, 14))),
                "tags": [self.r.choice(self.c.words) for _ in range(self.r.randint(0, 4))],
            })
        doc = {"total": n, "items": rows, "next": None if self.r.random() < 0.5 else n}
        text = json.dumps(doc, indent=2 if self.r.random() < 0.5 else None, ensure_ascii=False)
        return {"command": "curl -s localhost:8080/api/search | jq ."}, text

    def shell_output(self) -> tuple[dict, str]:
        kind = self.r.random()
        lines = []
        if kind < 0.35:
            cmd = "ls -la " + self.r.choice(("", "lookout_cli", "tests", "-R ."))
            for _ in range(self.r.choice((10, 40, 200, 800))):
                lines.append("-rw-r--r-- 1 dev dev {:>8} Nov {:>2} {:02}:{:02} {}".format(
                    self.r.randint(0, 400000), self.r.randint(1, 30), self.r.randint(0, 23),
                    self.r.randint(0, 59), self.r.choice(self.c.paths)))
        elif kind < 0.7:
            cmd = "grep -rn " + self.r.choice(self.c.words) + " ."
            for _ in range(self.r.choice((5, 30, 150, 600))):
                name, chunk = self.code(1, 1)
                lines.append(f"./{name}:{self.r.randint(1, 900)}:{chunk[0] if chunk else ''}")
        else:
            cmd = "python -m pytest -x -q"
            for _ in range(self.r.choice((10, 60, 300))):
                name, chunk = self.code(1, 3)
                if self.r.random() < 0.1:
                    lines.append(f'  File "/w/app/{name}", line {self.r.randint(1, 900)}, in test_{self.r.choice(self.c.words)}')
                    lines += ["    " + c for c in chunk]
                    lines.append(f"AssertionError: {self.prose(20, 120)}")
                else:
                    lines.append(f"{name}::test_{self.r.choice(self.c.words)} PASSED")
            lines.append(f"{self.r.randint(10, 900)} passed, {self.r.randint(0, 5)} failed in {self.r.random() * 90:.2f}s")
        return {"command": cmd, "description": self.prose(10, 60)}, "\n".join(lines)

    def edit_input(self) -> tuple[dict, str]:
        name, old = self.code(1, 12)
        _, new = self.code(1, 12)
        return ({"file_path": "/w/app/" + name, "old_string": "\n".join(old), "new_string": "\n".join(new)},
                f"The file /w/app/{name} has been updated.")

    def tool(self) -> tuple[str, dict, str]:
        x = self.r.random()
        if x < 0.40:
            name, (args, out) = "Read", self.read_output()
        elif x < 0.62:
            name, (args, out) = "Bash", self.shell_output()
        elif x < 0.78:
            name, (args, out) = "Bash", self.json_output()
        elif x < 0.90:
            name, (args, out) = "Grep", self.shell_output()
            args = {"pattern": self.r.choice(self.c.words), "path": "/w/app"}
        else:
            name, (args, out) = "Edit", self.edit_input()
        return name, args, out

    # --- the real shape (measured on real Claude Code and Codex sessions, see BENCHMARKS.md) ---
    def small_output(self) -> str:
        """A tool result as real ones run: most a line or a few (p50 about 160 characters), a
        tenth over 1.5 KB, now and then a long one."""
        x = self.r.random()
        if x < 0.4:
            return self.prose(20, 240)
        if x < 0.76:
            _, chunk = self.code(2, 25)
            return "\n".join(chunk)
        _, chunk = self.code(40, self.r.choice((60, 120, 400)))
        return "\n".join(chunk)

    def todos(self) -> dict:
        return {"todos": [{"content": self.prose(20, 80), "status": self.r.choice(("pending", "in_progress", "completed")),
                           "activeForm": self.prose(15, 60)} for _ in range(self.r.randint(2, 7))]}

    def real_tool(self) -> tuple[str, dict, str, object]:
        """(name, input, output, toolUseResult) in the mix of tools a real session calls."""
        x = self.r.random()
        if x < 0.37:
            cmd = self.r.choice(("npm run build", "git status", "ls -la", "python -m pytest -q", "cat package.json"))
            args = {"command": cmd + " " + self.prose(0, 120).split("\n")[0], "description": self.prose(10, 60)}
            out = self.small_output()
            return "Bash", args, out, {"stdout": out, "stderr": "", "interrupted": False, "isImage": False}
        if x < 0.54:
            name, chunk = self.code(3, self.r.choice((15, 40, 120)))
            first = self.r.randint(1, 300)
            out = "\n".join(f"{first + i:6}\u2192{line}" for i, line in enumerate(chunk))
            path = "/w/app/" + name
            return "Read", {"file_path": path}, out, {"type": "text", "file": {
                "filePath": path, "content": "\n".join(chunk), "numLines": len(chunk), "startLine": first,
                "totalLines": first + len(chunk)}}
        if x < 0.81:
            name, old = self.code(1, 30)
            _, new = self.code(1, self.r.choice((10, 40, 120)))
            path = "/w/app/" + name
            if self.r.random() < 0.5:
                args = {"file_path": path, "content": "\n".join(new)}
                tool = "Write"
            else:
                args = {"file_path": path, "old_string": "\n".join(old), "new_string": "\n".join(new)}
                tool = "Edit"
            out = f"The file {path} has been updated."
            return tool, args, out, {"type": "update", "filePath": path, "content": "\n".join(new[:8]),
                                     "structuredPatch": []}
        if x < 0.92:
            args = self.todos()
            out = "Todos have been modified successfully. Ensure that you continue to use the todo list."
            return "TodoWrite", args, out, {"oldTodos": [], "newTodos": args["todos"]}
        name, args = ("Grep", {"pattern": self.r.choice(self.c.words), "path": "/w/app"}) if x < 0.97 else \
            ("Glob", {"pattern": "**/*." + self.r.choice(("py", "ts", "tsx", "md"))})
        files = [self.r.choice(self.c.paths) for _ in range(self.r.randint(1, 12))]
        return name, args, "\n".join(files), {"filenames": files, "durationMs": self.r.randint(1, 90),
                                              "numFiles": len(files), "truncated": False}

    def png(self) -> tuple[int, int, str]:
        """A real PNG of seeded noise (the header carries the size; the body is incompressible)."""
        w, h = self.r.choice(((1280, 800), (1920, 1080), (800, 600), (2560, 1440)))
        body_bytes = self.r.randint(30_000, 150_000)
        raw = self.r.randbytes(body_bytes)

        def chunk(tag: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

        png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
               + chunk(b"IDAT", zlib.compress(raw, 1)) + chunk(b"IEND", b""))
        return w, h, base64.b64encode(png).decode()


# --- the abstract session ----------------------------------------------------------------

SHAPES = ("real", "generated")


def session(rng: random.Random, corpus: Corpus, shape: str = "real"):
    """Yield events forever: ('prompt', text, image|None) and ('step', thinking, text, calls, side)
    where calls is a list of (id, name, args, output, image|None, toolUseResult|None) and side
    the steps of a subagent the step's Task call ran (or None); plus ('progress', n)."""
    if shape == "generated":
        yield from _session_generated(rng, corpus)
    else:
        yield from _session_real(rng, corpus)


def _session_generated(rng: random.Random, corpus: Corpus):
    """The first shape: long tool outputs (lines average 5 KB), many progress lines, no subagents."""
    mk = Maker(rng, corpus)
    while True:
        image = mk.png() if rng.random() < 0.02 else None
        yield ("prompt", mk.prose(40, 900), image)
        for _ in range(rng.randint(1, 8)):
            thinking = mk.prose(100, 3000) if rng.random() < 0.6 else None
            text = mk.prose(20, 600) if rng.random() < 0.7 else None
            calls = []
            for _ in range(rng.choice((0, 1, 1, 1, 2, 3))):
                name, args, out = mk.tool()
                img = mk.png() if name == "Read" and rng.random() < 0.004 else None
                calls.append((f"toolu_{rng.getrandbits(96):024x}", name, args, out, img, None))
            yield ("step", thinking, text, calls, None)
            for _ in range(rng.choice((0, 1, 2, 4, 8, 14))):
                yield ("progress", rng.randint(0, 10**6))
            if not calls:
                break


def _real_steps(rng: random.Random, mk: Maker, depth: int):
    """One agent's turn as real sessions have it: mostly one tool call a response, a short text
    now and then, thinking in a quarter of them, a subagent (Task) in a few."""
    for _ in range(rng.choice((2, 4, 8, 15, 30))):
        thinking = mk.prose(60, 1500) if rng.random() < 0.25 else None
        text = mk.prose(30, 260) if rng.random() < 0.45 else None
        calls, side = [], None
        if depth == 0 and rng.random() < 0.08:
            cid = f"toolu_{rng.getrandbits(96):024x}"
            prompt = mk.prose(200, 900)
            side = [("prompt", prompt, None), *_real_steps(rng, mk, 1)]
            out = mk.prose(200, 1500)
            calls.append((cid, "Task", {"description": mk.prose(10, 40), "prompt": prompt,
                                        "subagent_type": "general-purpose"}, out, None,
                          {"content": [{"type": "text", "text": out}], "totalDurationMs": rng.randint(10**4, 10**6),
                           "totalTokens": rng.randint(10**4, 10**5), "totalToolUseCount": len(side)}))
        else:
            for _ in range(rng.choice((0, 1, 1, 1, 1, 1, 1, 2))):
                name, args, out, tur = mk.real_tool()
                img = mk.png() if name == "Read" and rng.random() < 0.01 else None
                calls.append((f"toolu_{rng.getrandbits(96):024x}", name, args, out, img, tur))
        yield ("step", thinking, text, calls, side)
        if rng.random() < 0.15:
            yield ("progress", rng.randint(0, 10**6))
        if not calls:
            return


def _session_real(rng: random.Random, corpus: Corpus):
    mk = Maker(rng, corpus)
    while True:
        image = mk.png() if rng.random() < 0.01 else None
        yield ("prompt", mk.prose(20, 700), image)
        yield from _real_steps(rng, mk, 0)
        yield ("step", None, mk.prose(40, 600), [], None)  # the turn's last reply


def _dumps(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


# --- writers -----------------------------------------------------------------------------

class ClaudeWriter:
    def __init__(self, rng: random.Random, shape: str = "real"):
        self.r = rng
        self.shape = shape
        self.sidechain = False
        self.session = str(uuid.UUID(int=rng.getrandbits(128)))
        self.parent = None
        self.t = 1_760_000_000.0
        self.context = 15_000
        self.prompts: list[str] = []  # the segment's prompts, for its summary

    def _uuid(self) -> str:
        return str(uuid.UUID(int=self.r.getrandbits(128), version=4))

    def _ts(self) -> str:
        import datetime as dt
        self.t += self.r.uniform(0.2, 20)
        return dt.datetime.fromtimestamp(self.t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"

    def _line(self, kind: str, message: dict, **extra) -> bytes:
        u = self._uuid()
        obj = {"parentUuid": self.parent, "isSidechain": self.sidechain, "userType": "external", "cwd": "/w/app",
               "sessionId": self.session, "version": "2.0.14", "gitBranch": "main", "type": kind,
               **({"message": message} if message is not None else {}), **extra, "uuid": u,
               "timestamp": self._ts()}
        self.parent = u
        return _dumps(obj)

    def compaction(self) -> bytes:
        """The two lines Claude Code appends when it compacts (formats.md §1.8): a boundary
        that starts a new root and points back through ``logicalParentUuid``, then the summary
        (a user line the next lines descend from). The summary holds the segment's prompts."""
        before, self.parent = self.parent, None
        boundary = self._line("system", None, subtype="compact_boundary", content="Conversation compacted",
                              isMeta=False, level="info", logicalParentUuid=before,
                              compactMetadata={"trigger": "auto", "preTokens": self.context})
        body = "\n\n".join(p[:600] for p in self.prompts[-12:])
        summary = ("This session is being continued from a previous conversation that ran out of context. "
                   "The conversation is summarized below:\nAnalysis:\n" + body)
        self.prompts = []
        self.context = AFTER_COMPACTION + len(summary) // 3
        return boundary + self._line("user", {"role": "user", "content": summary},
                                     isVisibleInTranscriptOnly=True, isCompactSummary=True)

    def event(self, ev) -> bytes:
        kind = ev[0]
        if (self.shape == "real" and kind != "progress" and not self.sidechain
                and self.context >= SUMMARY_POINT):  # before the request that would pass it, mid-turn too
            return self.compaction() + self.event(ev)
        if kind == "prompt":
            _, text, image = ev
            if not self.sidechain:
                self.prompts.append(text)
            content = [{"type": "text", "text": text}]
            if image:
                content.append({"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                            "data": image[2]}})
            self.context += len(text) // 3
            return self._line("user", {"role": "user", "content": content if image else text})
        if kind == "progress":
            obj = {"parentUuid": self.parent, "isSidechain": self.sidechain, "userType": "external", "cwd": "/w/app",
                   "sessionId": self.session, "version": "2.0.14", "gitBranch": "main", "type": "progress",
                   "data": {"type": "hook_progress", "hookEvent": "PostToolUse", "hookName": "PostToolUse:Bash",
                            "command": "true", "elapsed": ev[1]},
                   "toolUseID": f"toolu_{ev[1]:024x}", "uuid": self._uuid(), "timestamp": self._ts()}
            return _dumps(obj)
        _, thinking, text, calls, side = ev
        msg_id = f"msg_{self.r.getrandbits(96):024x}"
        req = f"req_{self.r.getrandbits(96):024x}"
        blocks = []
        if thinking:
            blocks.append({"type": "thinking", "thinking": thinking,
                           "signature": base64.b64encode(self.r.randbytes(120)).decode()})
        if text:
            blocks.append({"type": "text", "text": text})
        for cid, name, args, *_ in calls:
            blocks.append({"type": "tool_use", "id": cid, "name": name, "input": args})
        if not blocks:
            blocks.append({"type": "text", "text": "Done."})
        new = sum(len(b.get("thinking") or b.get("text") or json.dumps(b.get("input"))) for b in blocks) // 3
        usage = {"input_tokens": self.r.randint(1, 9), "cache_creation_input_tokens": new + 50,
                 "cache_read_input_tokens": self.context, "output_tokens": new + self.r.randint(5, 300),
                 "service_tier": "standard"}
        if self.shape == "real":
            usage["cache_creation"] = {"ephemeral_5m_input_tokens": new + 50, "ephemeral_1h_input_tokens": 0}
        self.context += new + 50
        out = b""
        for b in blocks:  # Claude Code writes one line per content block
            message = {"id": msg_id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
                       "content": [b], "stop_reason": None, "stop_sequence": None, "usage": usage}
            out += self._line("assistant", message, requestId=req)
        if side:  # a subagent's lines sit between its Task call and the call's result
            parent, context, self.parent, self.sidechain = self.parent, self.context, None, True
            for sub in side:
                out += self.event(sub)
            self.parent, self.context, self.sidechain = parent, context, False
        for cid, name, _, output, img, tur in calls:
            content = [{"type": "text", "text": output}]
            if img:
                content.append({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": img[2]}})
            self.context += len(output) // 3
            out += self._line("user", {"role": "user", "content": [
                {"tool_use_id": cid, "type": "tool_result", "content": content if img else output}]},
                toolUseResult=tur or {"stdout": output, "stderr": "", "interrupted": False, "isImage": bool(img)})
        return out


class CodexWriter:
    def __init__(self, rng: random.Random, shape: str = "real"):
        self.r = rng
        self.shape = shape
        self.t = 1_760_000_000.0
        self.total = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0,
                      "reasoning_output_tokens": 0, "total_tokens": 0}
        self.context = CODEX_SETUP
        self.started = False
        self.prompts: list[str] = []  # the window's prompts, for its summary

    def _ts(self) -> str:
        import datetime as dt
        self.t += self.r.uniform(0.2, 20)
        return dt.datetime.fromtimestamp(self.t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"

    def _rec(self, kind: str, payload: dict) -> bytes:
        return _dumps({"timestamp": self._ts(), "type": kind, "payload": payload})

    def _turn_context(self) -> bytes:
        return self._rec("turn_context", {"cwd": "/w/app", "approval_policy": "never",
                                          "sandbox_policy": {"mode": "danger-full-access"},
                                          "model": "gpt-5.1-codex", "effort": "high", "summary": "auto"})

    def compaction(self) -> bytes:
        """What Codex appends when it compacts on its own (formats.md §2.6, inline): the summary
        in a ``compacted`` record, a ``turn_context``, a ``context_compacted`` event. What the
        model sees then: the setup, the window's recent prompts and the summary."""
        message = CODEX_SUMMARY_PREFIX + "\n" + "\n\n".join(p[:600] for p in self.prompts[-12:])
        kept = min(CODEX_KEPT_PROMPTS, sum(len(p) // 3 for p in self.prompts))
        self.prompts = []
        self.context = CODEX_SETUP + kept + len(message) // 3
        return (self._rec("compacted", {"message": message}) + self._turn_context()
                + self._rec("event_msg", {"type": "context_compacted"}))

    def event(self, ev) -> bytes:
        out = b""
        if not self.started:
            self.started = True
            sid = str(uuid.UUID(int=self.r.getrandbits(128), version=4))
            out += self._rec("session_meta", {"id": sid, "timestamp": self._ts(), "cwd": "/w/app",
                                              "originator": "codex_cli_rs", "cli_version": "0.58.0",
                                              "instructions": None, "source": "cli", "model_provider": "openai"})
        kind = ev[0]
        if kind == "progress":
            return out
        if self.shape == "real" and self.context >= CODEX_COMPACT_AT:  # before the request that would pass it
            out += self.compaction()
        if kind == "prompt":
            _, text, image = ev
            content = [{"type": "input_text", "text": text}]
            if image:
                content.append({"type": "input_image", "image_url": "data:image/png;base64," + image[2]})
            self.context += len(text) // 3
            self.prompts.append(text)
            out += self._turn_context()
            out += self._rec("response_item", {"type": "message", "role": "user", "content": content})
            out += self._rec("event_msg", {"type": "user_message", "message": text, "images": []})
            return out
        _, thinking, text, calls, _side = ev  # a subagent writes its own file in these formats
        if thinking:
            out += self._rec("response_item", {"type": "reasoning", "summary": [
                {"type": "summary_text", "text": thinking[:400]}], "content": None,
                "encrypted_content": base64.b64encode(self.r.randbytes(len(thinking) // 2)).decode()})
        if text:
            out += self._rec("response_item", {"type": "message", "role": "assistant",
                                               "content": [{"type": "output_text", "text": text}]})
        new = len(text or "") // 3 + len(thinking or "") // 3
        for cid, name, args, output, *_ in calls:
            out += self._rec("response_item", {"type": "function_call", "name": "shell",
                                               "arguments": json.dumps({"command": ["bash", "-lc", name + " " + json.dumps(args)]}),
                                               "call_id": "call_" + cid[6:]})
            out += self._rec("response_item", {"type": "function_call_output", "call_id": "call_" + cid[6:],
                                               "output": json.dumps({"output": output, "metadata": {"exit_code": 0, "duration_seconds": 0.1}})})
            new += len(output) // 3
        last = {"input_tokens": self.context, "cached_input_tokens": max(0, self.context - new),
                "output_tokens": new // 4 + 10, "reasoning_output_tokens": len(thinking or "") // 3,
                "total_tokens": self.context + new // 4 + 10}
        for k in self.total:
            self.total[k] += last[k]
        self.context += new
        out += self._rec("event_msg", {"type": "token_count", "info": {
            "total_token_usage": dict(self.total), "last_token_usage": last, "model_context_window": 272000},
            "rate_limits": None})
        return out


class MessageListWriter:
    """openai: Chat Completions messages; anthropic: Messages API messages (one per line)."""

    def __init__(self, rng: random.Random, flavour: str):
        self.r = rng
        self.flavour = flavour
        self.started = False

    def event(self, ev) -> bytes:
        out = b""
        openai = self.flavour == "openai"
        if not self.started:
            self.started = True
            if openai:
                out += _dumps({"role": "system", "content": "You are a coding agent working in /w/app."})
        kind = ev[0]
        if kind == "progress":
            return out
        if kind == "prompt":
            _, text, image = ev
            if not image:
                return out + _dumps({"role": "user", "content": text})
            if openai:
                parts = [{"type": "text", "text": text},
                         {"type": "image_url", "image_url": {"url": "data:image/png;base64," + image[2]}}]
            else:
                parts = [{"type": "text", "text": text},
                         {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": image[2]}}]
            return out + _dumps({"role": "user", "content": parts})
        _, thinking, text, calls, _side = ev  # a subagent writes its own file in these formats
        if openai:
            msg = {"role": "assistant", "content": text}
            if calls:
                msg["tool_calls"] = [{"id": "call_" + cid[6:], "type": "function",
                                      "function": {"name": name, "arguments": json.dumps(args)}}
                                     for cid, name, args, *_ in calls]
            out += _dumps(msg)
            for cid, _, _, output, *_ in calls:
                out += _dumps({"role": "tool", "tool_call_id": "call_" + cid[6:], "content": output})
            return out
        blocks = []
        if thinking:
            blocks.append({"type": "thinking", "thinking": thinking,
                           "signature": base64.b64encode(self.r.randbytes(120)).decode()})
        if text:
            blocks.append({"type": "text", "text": text})
        for cid, name, args, *_ in calls:
            blocks.append({"type": "tool_use", "id": cid, "name": name, "input": args})
        out += _dumps({"role": "assistant", "content": blocks or [{"type": "text", "text": "Done."}]})
        if calls:
            out += _dumps({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": cid, "content": output} for cid, _, _, output, *_ in calls]})
        return out


def writer_for(fmt: str, rng: random.Random, shape: str = "real"):
    if fmt == "claude-code":
        return ClaudeWriter(rng, shape)
    if fmt == "codex":
        return CodexWriter(rng, shape)
    if fmt in ("openai", "anthropic"):
        return MessageListWriter(rng, fmt)
    raise SystemExit(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")


def generate(path: Path, fmt: str, size_mb: float, seed: int = SEED, corpus: Corpus | None = None,
             shape: str = "generated") -> dict:
    """Write a transcript of about ``size_mb`` MB (it ends on a whole step) in one of SHAPES; return
    its facts. The command line and the runner make the real shape unless told otherwise; called
    from Python the default is the first shape, the one the tests' expectations were set on."""
    corpus = corpus or Corpus()
    content_rng = random.Random(seed)
    w = writer_for(fmt, random.Random(seed + 1), shape)
    target = int(size_mb * MB)
    digest = hashlib.sha256()
    n = lines = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".part")
    with open(tmp, "wb", buffering=1 << 20) as fh:
        for ev in session(content_rng, corpus, shape):
            data = w.event(ev)
            if data:
                fh.write(data)
                digest.update(data)
                n += len(data)
                lines += data.count(b"\n")
            if n >= target and ev[0] == "step" and not ev[3]:
                break
    tmp.replace(path)
    return {"file": path.name, "format": fmt, "shape": shape, "bytes": n, "lines": lines, "sha256": digest.hexdigest(),
            "seed": seed, "version": VERSION}


def file_name(fmt: str, size: float, shape: str = "real") -> str:
    return f"{fmt}{'' if shape == 'real' else '-' + shape}_{size:g}mb.jsonl"


def shape_of(path: Path) -> dict:
    """Line sizes (p50, p90, mean, max) and shares of a Claude Code or Codex file, the figures the
    real shape was fitted to (BENCHMARKS.md)."""
    sizes, kinds = [], {}
    with open(path, "rb") as fh:
        for line in fh:
            sizes.append(len(line))
            obj = json.loads(line)
            kind = obj.get("type")
            if kind in ("user", "assistant") and isinstance(obj.get("message"), dict):
                content = obj["message"].get("content")
                blocks = [b.get("type") for b in content] if isinstance(content, list) else ["prompt"]
                kind = ",".join(sorted(set(blocks))) + (" sidechain" if obj.get("isSidechain") else "")
            elif kind == "response_item":
                kind = obj["payload"].get("type")
            elif kind == "event_msg":
                kind = obj["payload"].get("type")
            kinds[kind] = kinds.get(kind, 0) + len(line)
    sizes.sort()
    total = sum(sizes)
    return {"lines": len(sizes), "bytes": total, "p50": sizes[len(sizes) // 2], "p90": sizes[int(len(sizes) * 0.9)],
            "mean": round(total / max(1, len(sizes))), "max": sizes[-1] if sizes else 0,
            "byte_shares": {k: round(v / total, 3) for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.generate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=float, action="append", help="MB (repeatable; default 1 10 100)")
    ap.add_argument("--format", action="append", choices=FORMATS, help="repeatable; default all writable formats")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out"))
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--shape", choices=SHAPES, default="real",
                    help="real: measured on real sessions (default); generated: the first, long-output shape")
    args = ap.parse_args(argv)
    out = Path(args.out)
    corpus = Corpus()
    manifest_path = out / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for fmt in args.format or FORMATS:
        for size in args.size or (1, 10, 100):
            p = out / file_name(fmt, size, args.shape)
            facts = generate(p, fmt, size, args.seed, corpus, args.shape)
            manifest[p.name] = facts
            print(f"{p}  {facts['bytes']:,} B  {facts['lines']:,} lines  sha256 {facts['sha256'][:16]}", file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

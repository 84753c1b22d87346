"""The words of the view (``lookout_cli.formats.view``): the kinds of item, the parts of the setup, the
title of lookout's summary note.

Kept apart from the view's classes so that a module needing only the words does not build them:
the meter, which re-measuring an unchanged file loads, reads these but makes no items.
"""

# Item kinds
TEXT = "text"
THINKING = "thinking"
TOOL_CALL = "tool_call"
TOOL_RESULT = "tool_result"
IMAGE = "image"
SUMMARY = "summary"  # a compaction summary the agent (or lookout) wrote
NOTICE = "notice"  # harness-injected text: caveats, command output, system reminders
SETUP = "setup"  # system prompt, tool definitions, rules, environment, memory, skills

# The first line of the summary note ``compact`` writes (summary_note): how every format knows it
NOTE_TITLE = "# Summary of the earlier conversation (written by lookout compact)"

KINDS = (TEXT, THINKING, TOOL_CALL, TOOL_RESULT, IMAGE, SUMMARY, NOTICE, SETUP)

ASSISTANT_ROLES = ("assistant",)

# Setup parts (Item.setup)
SETUP_PARTS = ("system", "tools", "rules", "environment", "memory", "skills")

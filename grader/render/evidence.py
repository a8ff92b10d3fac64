"""The evidence tables of a worker's result: for each story, one row per observation, one column per phase.

Reads the JSON evidence (grader/results.py: each phase with its message in
"phase_message"); renders in `lang`. Worker-read values are escaped by the caller's format.
"""
import json

from ..messages import render, term, terms, text

ROWS = (
    ("evidence.order", lambda p, lang: text(lang, "present" if p["order"] else "absent")),
    ("evidence.outbox", lambda p, lang: term(lang, p["outbox"])),
    ("evidence.inbox", lambda p, lang: text(lang, "present" if p["inbox"] else "absent")),
    ("evidence.deliveries", lambda p, lang: terms(lang, p["deliveries"])),
    ("evidence.ack", lambda p, lang: text(lang, "evidence.not-sent") if p["ack"] is None
     else ", ".join(text(lang, "evidence.ack-seen", value=json.dumps(a)) for a in p["ack"]) or text(lang, "evidence.none")),
    ("evidence.inventory", lambda p, lang: str(p["inventory"])),
)
STORIES = ("crash-after-ack", "dropped-response")


def tables(evidence, lang, with_names=False):
    """[(title, rows)] for each story the grader observed; rows of cells, the first the header.

    With `with_names`, [(title, rows, the story's name)]: a page heads each table with the name alone.
    """
    found = []
    for name in STORIES:
        phases = evidence.get(name)
        if not phases:
            continue
        rows = [[text(lang, "evidence.observation")]
                + [text(lang, "evidence.after", phase=render(p["phase_message"], lang)) for p in phases]]
        rows += [[text(lang, label)] + [show(p, lang) for p in phases] for label, show in ROWS]
        found.append((text(lang, "evidence.title", name=name), rows, name))
    return found if with_names else [(title, rows) for title, rows, _ in found]

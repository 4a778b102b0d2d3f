"""A spool written by the release before spool.db (commit 8664ef0), for tests/spool/test_migration.py.

    git archive 8664ef0 agentmail | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old python tests/helpers/old_spool.py OUT_DIR

builds a small bus there with the old code (alpha, beta and beta's agent bob: threads open and
closed, a reply claim, a held and a rejected letter, a sibling note, a forgery in quarantine,
read and unread letters) and writes ``expected.json``: what the old code answers about it
through the public API. ``answers`` is used again by the test, on the converted spool: the
answers must be the same. tests/data/spool-8664ef0.tar.gz is OUT_DIR made this way.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from agentmail.admin import bus
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.config.registry import load
from agentmail.transport.local import deliver

try:
    from agentmail.spool.layout import reply_key
except ImportError:  # the release before: a reply claim was keyed by the Message-ID alone

    def reply_key(message_id: str, sender: str) -> str:
        return message_id


MAILBOXES = (("alpha", None), ("beta", None), ("beta", "bob"))
OPENER = """\
I am the agent of alpha (billing); we call beta's /quota endpoint for every invoice.
Reproduction: `curl -s https://beta.example/quota?id=7` returns status 500 with the output
"KeyError: 'plan'" since version 2.4.1 (2026-11-28). Expected 200 per the documented contract.
Blast radius: all invoices for users on the free plan. Please fix or tell us the new contract.
"""


# status row fields newer than the recording in spool-8664ef0.tar.gz (outcome: issue 26)
ADDED_SINCE = {"delivery_id", "outcome", "opened_at", "last_move_at"}


def answers(home: Path) -> dict[str, Any]:
    """Everything the views and the guards say, per mailbox, without syncing."""
    registry = load(home / "registry")
    out: dict[str, Any] = {}
    for platform, agent in MAILBOXES:
        am = AgentMail(registry, Identity(platform, agent), home)
        spool = am.spool
        mine: dict[str, Any] = {"states": {}, "letters": {}}
        for state in ("unread", "read", "sent", "outbox", "held", "failed", "quarantine"):
            ids = spool.read.ids(state)
            mine["states"][state] = ids
            for letter_id in ids:
                letter = am.show(letter_id)
                facts = letter.to_json()
                facts["raw"] = am.raw(letter_id).decode("utf-8", "replace")
                facts["replied_by"] = spool.home_claims.replied_by(reply_key(letter.message_id, letter.sender))
                if state in ("unread", "read"):
                    facts["why_refused"] = am.why_refused(letter_id)
                mine["letters"][letter_id] = facts
        mine["threads"] = {t: spool.read.thread_ids(t) for t in spool.read.threads()}
        mine["open"] = spool.read.open_threads()
        # a field the status row gained after the recording is not an answer it gave (issue 29: delivery_id)
        mine["status"] = [
            {k: v for k, v in row.to_json().items() if k not in ADDED_SINCE}
            for row in am.status(sync=False, closed=True)
        ]
        mine["checkpoint"] = spool.read.checkpoint("local")
        mine["notes"] = [x.id for x in am.notes(sync=False)]
        out[am.me.mailbox] = mine
        am.close()
    return out


def build(home: Path) -> None:
    registry = bus.init(
        home, home / "registry", ["alpha", "beta"], domain="bus.test", endpoints={"new_threads_per_hour": 0}
    )
    alpha = AgentMail(registry, Identity("alpha"), home)
    beta = AgentMail(registry, Identity("beta"), home)
    bob = AgentMail(registry, Identity("beta", "bob"), home)
    alpha.send("beta", "Quota 500s", OPENER, severity="high")
    alpha.send("beta", "Invoices time out", OPENER)
    alpha.send("beta", "Plan names", OPENER)
    first, second, third = sorted(beta.inbox(), key=lambda x: x.subject)
    beta.reply(first, "Reproduced; fixing.", type="ack")  # beta's claim: bob is refused
    beta.reply(third, "Not ours; closing.", type="close")
    bob.inbox()
    bob.note("Handover", "The quota fix is on branch fix-quota.")
    beta.done(second.id)
    alpha.sync()
    alpha.send("beta", "Held for a person", OPENER, hold=True)
    rejected = alpha.send("beta", "Rejected by a person", OPENER, hold=True)
    alpha.reject(rejected.id, "not now")
    forged = bytearray(alpha.raw(alpha.sent()[-1].id))
    forged = forged.replace(b"status 500", b"status 200")
    deliver(home / "postoffice" / "beta", bytes(forged).replace(b"Message-ID: <", b"Message-ID: <forged"))
    beta.sync()
    for am in (alpha, beta, bob):
        am.close()


def main() -> None:
    home = Path(sys.argv[1]) / "home"
    home.mkdir(parents=True)
    build(home)
    (home.parent / "expected.json").write_text(json.dumps(answers(home), indent=1, sort_keys=True))


if __name__ == "__main__":
    main()

"""Changes that would loosen what guards against the agent (DESIGN §6): with approvers listed,
such a change takes effect only after an approver's verified answer to its announcement.

    spool/<platform>/changes/<random>.json   {"change", "effect", "announced", "answers", "needs"}

The command that makes the change asks first (``ask``). The first time, the change is announced
to every approver and refused (exit 4). An approver answers ``approve`` or ``reject REASON`` by
mail; the platform's next sync records the answer (``guard_changes.record``, from
``Holds.decide_by_mail``).
The same command run again then finds it: approved, it goes on, once (the record is removed);
rejected, refused with the reason; answers that disagree never let it through. On a bus where
nobody approves, nothing is asked: a hold there guards against mistakes, not against the agent.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import bounds
from .._fs import write_atomic
from ..errors import AgentmailError, ConfigError, Refused
from ..text import one_line
from . import guard_changes
from .mailbox import Stage

if TYPE_CHECKING:
    from .holds import Holds
    from .mailbox import Mailbox
    from .to_people import ToPeople


class Consent(Stage):
    """The approvers' consent to one exact change of the guards, asked by mail."""

    def __init__(self, box: Mailbox, holds: Holds, people: ToPeople, sync: Callable[[], object]) -> None:
        super().__init__(box)
        self.holds = holds
        self.people = people
        self.sync = sync

    def ask(self, change: str, effect: str, platform: str | None = None, *, whole_bus: bool = False) -> str:
        """Return the approver who agreed to exactly ``change`` (one line, as shown to them), or
        "" when nobody approves on this bus; Refused (exit 4) otherwise, the request announced
        once; ConfigError (exit 6) when the approvers cannot be told. Who decides: the approvers
        of ``platform`` (the one whose guard it changes), else of this platform, else every
        approver of the bus — never a partner's approver on another platform's guard.
        ``whole_bus`` (a change of bus.toml: every platform's guard): an approver of each
        platform that has approvers must agree, whichever platform asks."""
        if not self.holds.every_approver():
            return ""
        needs = self.holds.approvers_by_platform() if whole_bus else {}
        everyone = tuple(dict.fromkeys(a for who in needs.values() for a in who)) or self.holds.deciders(platform)
        change = one_line(change)
        path = guard_changes.find(self.spool, change, one_line(effect))
        if path is not None:
            self.sync()  # an answer waiting in the mailbox is read now
        record = guard_changes.read(path) if path is not None else {}
        if path is None or not isinstance(record.get("announced"), str):
            waiting = len(guard_changes.pending(self.spool))
            if waiting >= bounds.ASKS_WAITING:  # one change after another never floods the approvers
                raise Refused(
                    f"{waiting} changes already wait for the approvers' answer by mail: this one is not "
                    "asked until they answered"
                )
            self._announce(change, effect, everyone, needs)
            raise Refused(
                f"this change waits for an approver: {', '.join(everyone)} were asked by mail; "
                "run the same command again once one has approved it"
            )
        answers = guard_changes.answers_of(record)
        if not answers:
            raise Refused("this change still waits for an approver's answer by mail (asked already: not asked again)")
        unmet = guard_changes.unmet(record, answers)
        if unmet and {guard_changes.verb_of(a) for a in answers} == {"approve"}:
            raise Refused(
                f"approved by {', '.join(a.split(' ', 1)[0] for a in answers)}; this change of the whole bus also "
                f"waits for an approver of {', '.join(unmet)} (asked already: not asked again)"
            )
        try:
            path.unlink()  # decided: once, by whichever command removes the record first
        except FileNotFoundError:
            raise Refused("this change's approval was taken up by another command already: ask again") from None
        verbs = {guard_changes.verb_of(a) for a in answers}
        if verbs == {"approve"}:
            return answers[0].split(" ", 1)[0]
        if verbs == {"reject"}:
            raise Refused(f"the change was rejected ({'; '.join(answers)}); nothing was changed")
        raise Refused(f"the approvers disagree ({'; '.join(answers)}); nothing was changed")

    def _announce(self, change: str, effect: str, everyone: tuple[str, ...], needs: dict[str, tuple[str, ...]]) -> None:
        try:
            message_id, raw = self.holds.change_request(change, effect, everyone)
        except AgentmailError as exc:
            raise ConfigError(f"nothing was changed: the approvers could not be asked ({exc})") from None
        folder = guard_changes.folder_of(self.spool)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{os.urandom(8).hex()}.json"  # before the mail: an answer always finds its record
        record = {"change": change, "effect": one_line(effect), "announced": message_id, "answers": [],
                  "deciders": list(everyone), "needs": {name: list(who) for name, who in needs.items()}}  # fmt: skip
        write_atomic(path, json.dumps(record).encode())
        failed = self.people.why_not(everyone, message_id, raw)
        if failed:
            path.unlink(missing_ok=True)
            raise ConfigError(f"nothing was changed: the approvers could not be asked ({failed})")

"""A person's letter is held to the same bounds as an agent's (bounds.py, read in
``wire.read_bounded`` before the letter is told apart): over one, quarantined ``too-large``
naming it; within them, its quoted history is cut as always."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmail import bounds
from agentmail.client.facade import AgentMail
from agentmail.config.identity import Identity
from agentmail.config.registry import Registry
from agentmail.transport.local import deliver

from .test_writing import an_agent_letter, client_letter, people, vouched  # noqa: F401  (the fixture)

OVER = {
    "QUOTED_LINES": {"body": "I agree.\n" + "\n".join(["> quoted"] * (bounds.QUOTED_LINES + 1))},
    "REFERENCES": {"body": "I agree.", "references": " ".join(f"<r{i}@people.test>" for i in range(101))},
    "SUBJECT": {"body": "I agree.", "subject": "Re: " + "s" * (bounds.SUBJECT + 1)},
    "ADDRESS_CHARS": {"body": "I agree.", "cc": ", ".join(f"p{i}@people.test" for i in range(600))},
}


@pytest.mark.parametrize("bound", OVER)
def test_a_persons_letter_over_a_bound_is_quarantined_naming_it(bound: str, people: Registry, home: Path) -> None:
    alpha = AgentMail(people, Identity("alpha"), home)
    thread, mid = an_agent_letter(alpha)
    choice = dict(OVER[bound])  # a copy: the table is read again by the next run in the same process
    body = str(choice.pop("body")) if "body" in choice else ""
    deliver(
        home / "postoffice" / "alpha",
        vouched(client_letter(f"alpha+{thread}@bus.test", body, in_reply_to=mid, **choice)),
    )  # type: ignore[arg-type]
    report = alpha.sync()
    assert report.accepted == [] and [x.reason for x in report.quarantined] == ["too-large"]
    assert str(report.quarantined[0].detail).endswith(f"(bounds.{bound})")


def test_a_persons_letter_of_many_attributions_is_cut_and_filed(people: Registry, home: Path) -> None:
    alpha = AgentMail(people, Identity("alpha"), home)
    thread, mid = an_agent_letter(alpha)
    body = "Fixed now.\n\n" + "\n".join(["On Monday, alpha wrote:"] * 5000) + "\n> the quota endpoint returns 500"
    deliver(home / "postoffice" / "alpha", vouched(client_letter(f"alpha+{thread}@bus.test", body, in_reply_to=mid)))
    (got,) = alpha.sync().accepted
    assert got.thread == thread and got.body.startswith("Fixed now.")
    assert got.body.count("wrote:") == 4998  # the two lines right above the quote read as its attribution


def test_a_persons_html_with_a_long_style_value_is_filed_without_holding_the_sync(people: Registry, home: Path) -> None:
    # 200,000 digits in a width: the old search took hours on it, under the mailbox lock
    alpha = AgentMail(people, Identity("alpha"), home)
    thread, mid = an_agent_letter(alpha)
    html = '<html><body><p>Fixed now.</p><p style="width:' + "0" * 200_000 + 'x">Deployed at noon.</p></body></html>'
    deliver(
        home / "postoffice" / "alpha",
        vouched(client_letter(f"alpha+{thread}@bus.test", "", in_reply_to=mid, html=html)),
    )
    (got,) = alpha.sync().accepted
    assert got.thread == thread and got.body.split() == ["Fixed", "now.", "Deployed", "at", "noon."]

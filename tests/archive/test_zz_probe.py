from __future__ import annotations
import xml.etree.ElementTree as ET
from pathlib import Path
from agentmail.archive import site, serve, gather
from agentmail.client.facade import AgentMail
from ..conftest import OPENER

def test_probe_feed(alpha: AgentMail, beta: AgentMail, tmp_path: Path) -> None:
    alpha.send("beta", "Quota \uffff x", OPENER + "\n\uffff ]]> </content><x>")
    beta.inbox()
    site.write([beta], tmp_path / "a", bus="bus")
    print((tmp_path / "a" / "atom.xml").read_text()[:2000])
    ET.fromstring((tmp_path / "a" / "atom.xml").read_bytes())

def test_probe_search(alpha: AgentMail, beta: AgentMail) -> None:
    alpha.send("beta", "Quota", OPENER)
    beta.inbox()
    live = serve.Live([beta], "bus", False)
    for q in ['"', 'NEAR(', '*', '^a', 'a AND', '(', 'a:b', "'", '-x', 'x' * 500, 'a OR b NOT', '{a}', '"a" *', 'NOT', 'a"b']:
        try:
            live.search(q)
        except Exception as exc:
            print(q, type(exc).__name__, exc)
            if type(exc).__name__ != "BadInput":
                raise

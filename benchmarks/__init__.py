"""agentmail's benchmark suite: ``python -m benchmarks [--quick] [--json-out FILE]``.

Every figure is measured beside a baseline taken in the same run (bare Python doing only the
file or network work a letter needs), so the ratio says what agentmail itself costs:

    local.py     1 warm delivery latency · 4 send throughput · 5 sync throughput   (API)
    cli.py       2 CLI round trip · 3 start-up                          (whole processes)
    scale.py     6 the same commands on spools of 1k, 10k and 100k letters (spoolgen.py)
    history.py   9 send, reply, a sync of one letter, inbox/status/thread at 100 and 100k letters (in process)
    smtpimap.py  7 the smtp+imap transport on loopback test servers
    report.py    figures, targets, the table and the JSON

Helpers: common.py (settings, throw-away buses, process timing), bare.py (the baselines),
waiting.py (an already-running waiter), letters.py (realistic signed letters in bulk).
README.md has the reference run and why each missed target misses. integrations.py (MCP,
watch) is a separate script: ``python benchmarks/integrations.py``.
"""

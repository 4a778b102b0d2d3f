"""A thread anyone can open (DESIGN §10): a proof bundle that verifies offline (``proof``, with the
registry entries in force from ``history``), a static site of a mailbox or a bus (``gather`` reads
the client, ``pages`` renders with autoescaped templates, ``site`` writes incrementally) and the
same pages served live (``serve``, the ``agentmail[web]`` extra)."""

"""The steps a letter passes between the spool and the agent: guards, composing, routing, evidence."""
